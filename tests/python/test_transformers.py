"""specdec.transformers: the custom_generate loop on tiny transformers models made here (no downloads),
and torch tensors as inputs of the core API. Skipped, saying why, where torch or transformers is not
installed (``pip install ./python[transformers]``)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install ./python[transformers])")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import specdec  # noqa: E402
import specdec.transformers as st  # noqa: E402
from conftest import chi2_critical, chi2_statistic  # noqa: E402

V = 48
PROMPT = [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6]


def tiny_llama(seed, layers=2, sharpness=1.0, vocab=V):
    """A random-weight Llama; `sharpness` scales the output layer (peaked rows repeat themselves, so
    model-free drafts get accepted)."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                   bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpness)
    return model


@pytest.fixture(scope="module")
def target():
    return tiny_llama(0, sharpness=8.0)


@pytest.fixture(scope="module")
def draft():
    return tiny_llama(1, layers=1, sharpness=8.0)


def ids(*rows):
    return torch.tensor([list(r) for r in rows], dtype=torch.long)


def spec(target, prompt=PROMPT, **kw):
    kw.setdefault("max_new_tokens", 48)
    return target.generate(ids(prompt), custom_generate=st.generate, **kw)


DRAFTS = ["ngram", "suffix", "model"]


def drafter_args(name, draft):
    return dict(draft_model=draft) if name == "model" else dict(drafter=name)


@pytest.mark.parametrize("name", DRAFTS)
@pytest.mark.parametrize("gamma", [1, 4])
def test_greedy_equals_transformers_greedy_decoding(target, draft, name, gamma):
    ref = target.generate(ids(PROMPT), max_new_tokens=48, do_sample=False)
    out, stats = spec(target, do_sample=False, gamma=gamma, return_stats=True, **drafter_args(name, draft))
    assert out.tolist() == ref.tolist()
    assert stats[0].new_tokens == 48 and stats[0].drafted > 0
    assert stats[0].rounds + stats[0].accepted == 48  # each round emits its accepted drafts and one more token


@pytest.mark.parametrize("name", DRAFTS)
def test_the_step_decoder_on_kv_cached_transformers_models_equals_greedy_decoding(target, draft, name):
    """specdec.Decoder over st.sequence_model (a DynamicCache per request): three requests in one batch,
    each equal to transformers' greedy decoding; every request's caches released at its end."""
    ref = target.generate(ids(PROMPT), max_new_tokens=24, do_sample=False)[0, len(PROMPT):].tolist()
    t = st.SequenceModel(target)
    d = specdec.Decoder(specdec.decoder.python_sequence_model(t, V),
                        st.sequence_model(draft) if name == "model" else None, rule=specdec.Greedy())
    handles = [d.add(PROMPT, drafter=name, gamma=4, max_new_tokens=24, request_id=i, seed=i) for i in range(3)]
    out = d.run()
    for h in handles:
        assert out[h].tolist() == ref
    assert not t._caches, "finished requests release their caches"


def test_the_model_free_drafters_are_accepted_on_a_repeating_target(target):
    for name in ("ngram", "suffix"):
        _, stats = spec(target, do_sample=False, drafter=name, return_stats=True)
        assert stats[0].accepted > 0 and stats[0].rounds < 48, name


def test_a_left_padded_batch_decodes_each_row_as_alone(target, draft):
    short = [9, 8, 7, 9, 8]
    batch = ids([0] * (len(PROMPT) - len(short)) + short, PROMPT)
    mask = (torch.arange(len(PROMPT))[None] >= torch.tensor([[len(PROMPT) - len(short)], [0]])).long()
    out = target.generate(batch, attention_mask=mask, custom_generate=st.generate, drafter="ngram", max_new_tokens=20,
                          do_sample=False)
    for b, p in enumerate((short, PROMPT)):
        alone = spec(target, p, drafter="ngram", max_new_tokens=20, do_sample=False)
        assert out[b, len(PROMPT):].tolist() == alone[0, len(p):].tolist()
        assert out[b, :len(PROMPT)].tolist() == batch[b].tolist()


def test_eos_ends_a_row_and_the_rest_is_padding(target):
    ref = spec(target, do_sample=False, drafter="ngram")[0, len(PROMPT):].tolist()
    stop = ref[5]  # the sixth new token plays EOS
    out = spec(target, do_sample=False, drafter="ngram", eos_token_id=stop, pad_token_id=0)
    new = out[0, len(PROMPT):].tolist()
    end = ref.index(stop) + 1
    assert new[:end] == ref[:end] and all(t == 0 for t in new[end:])


@pytest.mark.parametrize("name", DRAFTS)
def test_sampling_with_any_drafter_emits_what_target_only_decoding_emits(target, name):
    """Output positions key the target's samples: sample-and-match with any drafter equals gamma 0;
    keyed by the round (control), the same run differs once a draft was accepted. The draft model is
    the target itself (self-drafting, so that drafts get accepted)."""
    draft = target
    kw = dict(do_sample=True, temperature=0.8, seeds=11, request_ids=4, max_new_tokens=40)
    base = spec(target, gamma=0, **kw)
    out, stats = spec(target, rule=specdec.SampleAndMatch(), return_stats=True, **drafter_args(name, draft), **kw)
    assert stats[0].accepted > 0
    assert out.tolist() == base.tolist()
    control = spec(target, rule=specdec.SampleAndMatch(), sample_keys="round", **drafter_args(name, draft), **kw)
    assert control.tolist() != base.tolist()


def test_a_request_alone_equals_the_request_in_a_batch(target, draft):
    kw = dict(custom_generate=st.generate, draft_model=draft, do_sample=True, max_new_tokens=24)
    alone = target.generate(ids(PROMPT), seeds=5, request_ids=9, **kw)
    other = [7, 7, 3, 1, 4, 4, 3, 1, 4, 4, 3, 1]
    batch = target.generate(ids(other, PROMPT), seeds=[2, 5], request_ids=[1, 9], **kw)
    assert batch[1].tolist() == alone[0].tolist()


def test_strict_with_a_draft_model_keeps_the_targets_law_of_the_first_token():
    """Chi-squared of the first new token (one draft verified by Strict) against the target's softmax;
    negative control: Lenient(0.1), which accepts the draft's tokens too often, must fail."""
    tgt, drf = tiny_llama(3, layers=1, sharpness=3.0, vocab=12), tiny_llama(4, layers=1, sharpness=3.0, vocab=12)
    with torch.no_grad():
        p = torch.softmax(tgt(ids(PROMPT)).logits[0, -1].double(), -1).numpy()
        q = torch.softmax(drf(ids(PROMPT)).logits[0, -1].double(), -1).numpy()
    assert 0.5 * np.abs(p - q).sum() > 0.2  # the draft is far from the target: a wrong rule shows
    N = 1500
    config = transformers.GenerationConfig(max_new_tokens=2, do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    for rule, lossless in ((specdec.Strict(), True), (specdec.Lenient(0.1), False)):
        counts = np.zeros(12)
        for seed in range(N):
            out = st.generate(tgt, ids(PROMPT), generation_config=config, draft_model=drf, gamma=1, rule=rule,
                              seeds=seed)
            counts[out[0, len(PROMPT)]] += 1
        stat, dof = chi2_statistic(counts, p)
        assert (stat < chi2_critical(dof)) == lossless, (rule, stat, chi2_critical(dof))


def test_bad_input_is_refused_with_a_clear_error(target, draft):
    with pytest.raises(ValueError, match="RepetitionPenaltyLogitsProcessor"):
        spec(target, do_sample=False, drafter="ngram", repetition_penalty=1.3)
    with pytest.raises(ValueError, match="draft_model, drafter"):
        spec(target, do_sample=False, drafter="ngram", draft_model=draft)
    with pytest.raises(ValueError, match="drafter"):
        spec(target, do_sample=False, drafter="medusa")
    with pytest.raises(ValueError, match="gamma"):
        spec(target, do_sample=False, drafter="ngram", gamma=-1)
    with pytest.raises(specdec.Error, match="max_n"):
        spec(target, do_sample=False, drafter="ngram", ngram_min=3, ngram_max=2)
    with pytest.raises(ValueError, match="seeds"):
        spec(target, do_sample=True, drafter="ngram", seeds=[1, 2, 3])
    with pytest.raises(ValueError, match="row 0 has no token"):
        target.generate(ids(PROMPT), attention_mask=torch.zeros(1, len(PROMPT), dtype=torch.long),
                        custom_generate=st.generate, drafter="ngram", max_new_tokens=4, do_sample=False)


# ---- torch tensors as inputs of the core API (DLPack) ----------------------------------------------


def torch_rows(B=2, n=3, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(B, n, V, generator=g, dtype=dtype)
    p = torch.rand(B, n + 1, V, generator=g, dtype=dtype)
    q /= q.sum(-1, keepdim=True)
    p /= p.sum(-1, keepdim=True)
    return q.argmax(-1).to(torch.int32), q, p


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_cpu_tensors_are_read_in_place(dtype, backend):
    drafts, q, p = torch_rows(dtype=dtype)
    assert specdec._core._data_address(q) == q.data_ptr()
    assert specdec._core._data_address(p) == p.data_ptr()
    kw = dict(seeds=3, request_ids=[0, 1], steps=0, backend=backend)
    got = specdec.verify(specdec.Strict(), drafts, q, p, **kw)
    want = specdec.verify(specdec.Strict(), drafts.numpy(), q.numpy(), p.numpy(), **kw)
    assert np.array_equal(got.tokens, want.tokens) and np.array_equal(got.num_accepted, want.num_accepted)
    logits = torch.log(p)
    got = specdec.verify_from_logits(specdec.SampleAndMatch(), drafts, logits, temperature=0.7, **kw)
    want = specdec.verify_from_logits(specdec.SampleAndMatch(), drafts.numpy(), logits.numpy(), temperature=0.7, **kw)
    assert np.array_equal(got.tokens, want.tokens)


def test_results_come_back_as_torch_tensors_for_torch_rows(backend):
    """Torch rows in, torch tensors out (sharing the result arrays' memory), equal to the numpy call's
    results; numpy rows give numpy arrays; a caller's numpy out= is returned as given."""
    drafts, q, p = torch_rows(B=3, n=2, seed=4)
    kw = dict(seeds=5, request_ids=[0, 1, 2], steps=1, backend=backend)
    logits = torch.log(p)
    p0, logits0 = p[:, 0].contiguous(), logits[:, 0].contiguous()
    cases = {
        "verify (direct call)": lambda x: specdec.verify(specdec.Strict(), drafts.numpy(), x(q), x(p), **kw),
        "verify (checked path)": lambda x: specdec.verify(specdec.Strict(), drafts.tolist(), x(q), x(p), **kw),
        "verify_from_logits": lambda x: specdec.verify_from_logits(specdec.SampleAndMatch(), drafts.numpy(), x(logits),
                                                                   temperature=0.7, **kw),
        "verify_from_logits (checked path)": lambda x: specdec.verify_from_logits(
            specdec.SampleAndMatch(), drafts.tolist(), x(logits), temperature=[0.7] * 3, **kw),
        "verify_tree": lambda x: specdec.verify_tree(specdec.Greedy(), [[-1, 0, 1]] * 3, np.zeros((3, 3), np.int32),
                                                     None, x(p), **kw),
        "sample": lambda x: specdec.sample(x(p0), **kw),
        "sample_logits": lambda x: specdec.sample_logits(x(logits0), temperature=0.5, **kw),
        "softmax": lambda x: specdec.softmax(x(logits0), return_status=True, backend=backend),
        "warp_logits": lambda x: specdec.warp_logits(x(logits0), top_k=2, return_status=True, backend=backend),
    }
    for name, call in cases.items():
        got, want = call(lambda t: t), call(lambda t: t.numpy())
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            assert torch.is_tensor(g), f"{name}: expected torch tensors for torch rows, got {type(g).__name__}"
            assert isinstance(w, np.ndarray) and not torch.is_tensor(w), name
            np.testing.assert_array_equal(g.numpy(), w, err_msg=name)
    out = (np.zeros((3, 3), np.int32), np.zeros(3, np.int32), np.zeros(3, np.uint8))
    got = specdec.verify(specdec.Strict(), drafts.numpy(), q, p, out=out, **kw)
    assert all(g is o for g, o in zip(got, out)), "a caller's out= arrays are what is returned"


def test_torch_tensors_of_a_wrong_dtype_or_layout_are_refused():
    drafts, q, p = torch_rows()
    kw = dict(seeds=3, request_ids=[0, 1], steps=0)
    with pytest.raises(TypeError, match="draft_probs"):
        specdec.verify(specdec.Strict(), drafts, q.half(), p, **kw)
    with pytest.raises(TypeError, match="target_probs"):
        specdec.verify(specdec.Strict(), drafts, q, p.transpose(0, 1).contiguous().transpose(0, 1), **kw)


def test_vllm_rejection_sampler_takes_torch_tensors_and_generators():
    """vLLM's own types: torch metadata tensors, torch logits and q, torch.Generator seeds; the result
    is a torch int32 tensor equal to the numpy path's."""
    from specdec import vllm
    from test_vllm import make_metadata, sampling_metadata, Generator

    rng = np.random.default_rng(3)
    lists = [[1, 2, 3], [], [4, 5]]
    m = make_metadata(lists)
    N, B, Vv = len(m.draft_token_ids), len(lists), 12
    logits = (rng.standard_normal((N + B, Vv)) * 2).astype(np.float32)
    q = specdec.softmax(rng.standard_normal((N, Vv))).astype(np.float32)
    t = np.array([0.8, 1.0, 0.0], np.float32)
    sm = sampling_metadata(t, generators={0: Generator(42)})
    want = vllm.RejectionSampler(default_seed=7).forward(m, q, logits, sm, request_ids=["a", "b", "c"])
    want = want.sampled_token_ids
    tm = make_metadata(lists)
    for name in ("draft_token_ids", "cu_num_draft_tokens", "cu_num_sampled_tokens", "target_logits_indices",
                 "bonus_logits_indices", "logits_indices"):
        setattr(tm, name, torch.from_numpy(getattr(tm, name)))
    sm = sampling_metadata(t, generators={0: torch.Generator().manual_seed(42)})  # vLLM's own generator type
    sm.temperature = torch.from_numpy(t)
    got = vllm.RejectionSampler(default_seed=7).forward(tm, torch.from_numpy(q), torch.from_numpy(logits), sm,
                                                        request_ids=["a", "b", "c"]).sampled_token_ids
    assert torch.is_tensor(got) and got.dtype == torch.int32
    np.testing.assert_array_equal(got.numpy(), want)

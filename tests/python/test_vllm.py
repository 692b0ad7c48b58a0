"""specdec.vllm: vLLM V1's packed layout, greedy and sampled requests, one-hot q for greedy drafts."""

import numpy as np
import pytest

import specdec
from specdec import vllm
from conftest import chi2_critical, chi2_statistic


def test_indices_of_vllms_worked_example():
    # vLLM's _calc_spec_decode_metadata example: num_draft_tokens [3, 0, 2, 0, 1]
    idx = vllm.spec_decode_indices([3, 0, 2, 0, 1])
    assert idx.cu_num_draft_tokens.tolist() == [3, 3, 5, 5, 6]
    assert idx.target_logits_indices.tolist() == [0, 1, 2, 5, 6, 9]
    assert idx.bonus_logits_indices.tolist() == [3, 4, 7, 8, 10]


def batch(rng, nd, V=30):
    N, B = int(sum(nd)), len(nd)
    logits = rng.standard_normal((N + B, V)) * 2
    q = specdec.softmax(rng.standard_normal((N, V)))
    drafts = np.array([rng.choice(V, p=row) for row in q], dtype=np.int64)
    return drafts, q, logits


def test_sampled_requests_are_verify_from_logits_on_the_packed_layout():
    rng = np.random.default_rng(1)
    nd = np.array([3, 0, 2, 0, 1])
    drafts, q, logits = batch(rng, nd)
    kw = dict(seeds=5, request_ids=np.arange(5) + 100, steps=2)
    t = np.array([0.7, 1.0, 1.3, 0.9, 1.0])
    out = vllm.rejection_sample(drafts, nd, q, logits, temperature=t, top_k=[0, 5, 10, 0, 3], top_p=[1, 0.9, 1, 1, 0.8],
                                **kw)
    ref = specdec.verify_from_logits(specdec.Strict(), drafts, logits, draft_probs=q, num_drafts=nd, temperature=t,
                                     top_k=[0, 5, 10, 0, 3], top_p=[1, 0.9, 1, 1, 0.8], **kw)
    assert out.dtype == np.int32 and out.shape == (5, 4)
    np.testing.assert_array_equal(out, ref.tokens)
    assert vllm.parse_output(out, 30) == [ref.emitted(b) for b in range(5)]


def test_greedy_equals_greedy_target_only_decoding():
    rng = np.random.default_rng(2)
    nd = np.array([4, 1, 0, 3])
    drafts, _, logits = batch(rng, nd, V=6)  # a small V: drafts often match the argmax
    out = vllm.rejection_sample(drafts, nd, None, logits, temperature=np.zeros(4), seeds=0, request_ids=np.arange(4),
                                steps=0)
    idx = vllm.spec_decode_indices(nd)
    starts = idx.cu_num_draft_tokens - nd
    for b in range(4):
        rows = logits[idx.bonus_logits_indices[b] - nd[b]: idx.bonus_logits_indices[b] + 1]
        expected = []
        for i in range(nd[b] + 1):  # target-only greedy decoding, stopped where the drafts diverge
            expected.append(int(rows[i].argmax()))
            if i == nd[b] or drafts[starts[b] + i] != expected[-1]:
                break
        assert vllm.parse_output(out[b:b + 1], 6)[0] == expected


def test_a_mixed_batch_gives_each_request_its_own_tokens():
    rng = np.random.default_rng(3)
    nd = np.array([2, 3, 1, 2, 0, 2])
    drafts, q, logits = batch(rng, nd)
    t = np.array([0.0, 0.8, 0.0, 1.2, 1.0, 0.0])
    kw = dict(seeds=np.arange(6) * 11, request_ids=np.arange(6) + 7, steps=np.arange(6))
    mixed = vllm.rejection_sample(drafts, nd, q, logits, temperature=t, **kw)
    idx = vllm.spec_decode_indices(nd)
    starts = idx.cu_num_draft_tokens - nd
    for b in range(6):
        d = slice(starts[b], starts[b] + nd[b])
        rows = slice(idx.bonus_logits_indices[b] - nd[b], idx.bonus_logits_indices[b] + 1)
        alone = vllm.rejection_sample(drafts[d], nd[b:b + 1], q[d], logits[rows], temperature=t[b:b + 1],
                                      seeds=kw["seeds"][b], request_ids=kw["request_ids"][b:b + 1],
                                      steps=kw["steps"][b])
        assert alone[0].tolist() == mixed[b, :nd[b] + 1].tolist()
    assert (mixed[4, 1:] == -1).all()


@pytest.mark.parametrize("draft", [0, 3])
def test_one_hot_q_for_greedy_drafts_emits_the_warped_target_law(draft):
    # A deterministic drafter (q one-hot, vLLM's draft_prob = 1): the first emitted token is distributed
    # as the target's warped row whatever the draft, here with temperature 0.7 and top-k 4.
    logits = np.log(np.array([0.05, 0.3, 0.1, 0.35, 0.15, 0.05]))
    n = 20_000
    out = vllm.rejection_sample(np.full(n, draft), np.ones(n, np.int64), None,
                                np.tile(np.stack([logits, logits]), (n, 1)), temperature=np.full(n, 0.7),
                                top_k=np.full(n, 4), seeds=3, request_ids=np.arange(n), steps=0)
    counts = np.bincount(out[:, 0], minlength=6)
    warped = specdec.warp_logits(logits, temperature=0.7, top_k=4)
    stat, dof = chi2_statistic(counts, warped)
    assert stat < chi2_critical(dof), stat
    # negative control: the unwarped target law is rejected
    stat, dof = chi2_statistic(counts, np.exp(logits))
    assert stat > chi2_critical(dof), stat


def test_bad_draft_ids_are_flagged_not_raised():
    logits = np.zeros((3, 4))
    out, status = vllm.rejection_sample(np.array([7, 1]), [1, 1], None, np.zeros((4, 4)), temperature=[1.0, 1.0],
                                        seeds=0, request_ids=[0, 1], steps=0, return_status=True)
    assert status[0] == specdec.Status.BAD_DRAFT_TOKEN and out[0].tolist() == [-1, -1]
    assert specdec.is_valid(status[1])
    with pytest.raises(ValueError, match="logits: expected shape"):
        vllm.rejection_sample(np.array([1]), [1], None, logits[None], seeds=0, request_ids=[0], steps=0)


# ---- vllm.RejectionSampler: vLLM V1's call shape, with vLLM's metadata built from its published layout ----

from dataclasses import dataclass, field  # noqa: E402
from types import SimpleNamespace  # noqa: E402


@dataclass
class SpecDecodeMetadata:
    """vLLM's vllm/v1/spec_decode/metadata.py fields (numpy in place of torch tensors), filled as
    vLLM's model runner fills them: request b's n_b drafted rows then its bonus row."""

    draft_token_ids: np.ndarray  # int32 [N]
    num_draft_tokens: list  # [B]
    cu_num_draft_tokens: np.ndarray  # int32 [B], inclusive prefix sums
    cu_num_sampled_tokens: np.ndarray  # int32 [B]
    target_logits_indices: np.ndarray  # int32 [N]
    bonus_logits_indices: np.ndarray  # int32 [B]
    logits_indices: np.ndarray  # int32 [N + B]
    max_spec_len: int = field(init=False)

    def __post_init__(self):
        self.max_spec_len = max(self.num_draft_tokens)


def make_metadata(draft_token_ids):
    """From per-request draft lists, as vLLM's _calc_spec_decode_metadata lays the rows out."""
    nd = [len(d) for d in draft_token_ids]
    cu_sampled = np.cumsum([n + 1 for n in nd]).astype(np.int32)
    target = [cu_sampled[b] - 1 - nd[b] + i for b in range(len(nd)) for i in range(nd[b])]
    return SpecDecodeMetadata(np.array(sum(draft_token_ids, []), np.int32), nd, np.cumsum(nd).astype(np.int32),
                              cu_sampled, np.array(target, np.int32), (cu_sampled - 1).astype(np.int32),
                              np.arange(sum(nd) + len(nd), dtype=np.int32))


class Generator:
    """Stands for the torch.Generator vLLM makes for a seeded request (manual_seed(params.seed))."""

    def __init__(self, seed):
        self.seed = seed

    def initial_seed(self):
        return self.seed


def sampling_metadata(temperature, top_k=None, top_p=None, generators=None):
    t = None if temperature is None else np.asarray(temperature, np.float32)
    return SimpleNamespace(temperature=t, all_greedy=t is None or bool((t < 1e-5).all()),
                           all_random=t is not None and bool((t >= 1e-5).all()), top_k=top_k, top_p=top_p,
                           generators=generators or {}, max_num_logprobs=None)


def test_the_metadata_built_here_is_vllms_worked_example():
    m = make_metadata([[1, 2, 3], [], [4, 5], [], [6]])
    assert m.cu_num_sampled_tokens.tolist() == [4, 5, 8, 9, 11]
    assert m.target_logits_indices.tolist() == [0, 1, 2, 5, 6, 9]
    assert m.bonus_logits_indices.tolist() == [3, 4, 7, 8, 10] and m.max_spec_len == 3


def test_forward_is_rejection_sample_with_the_requests_seeds():
    rng = np.random.default_rng(11)
    lists = [[1, 2, 3], [], [4, 5], [0], [6, 7]]
    m = make_metadata(lists)
    N, B, V = len(m.draft_token_ids), len(lists), 12
    logits = (rng.standard_normal((N + B, V)) * 2).astype(np.float32)
    q = specdec.softmax(rng.standard_normal((N, V))).astype(np.float32)
    t = np.array([0.8, 1.0, 0.0, 1.3, 0.7], np.float32)  # request 2 greedy
    sm = sampling_metadata(t, top_k=np.array([0, 5, 0, 3, 0]), top_p=np.array([1.0, 0.9, 1.0, 1.0, 0.8]),
                           generators={0: Generator(1234), 3: Generator(99)})
    ids = ["req-a", "req-b", "req-c", "req-d", "req-e"]
    out = vllm.RejectionSampler(default_seed=7).forward(m, q, logits, sm, request_ids=ids)
    tokens = out.sampled_token_ids
    assert out.logprobs_tensors is None
    assert tokens.dtype == np.int32 and tokens.shape == (B, m.max_spec_len + 1)
    import zlib
    keys = np.array([zlib.crc32(s.encode()) for s in ids], np.uint32)
    ref = vllm.rejection_sample(m.draft_token_ids, m.num_draft_tokens, q, logits, temperature=t, top_k=sm.top_k,
                                top_p=sm.top_p, seeds=np.array([1234, 7, 7, 99, 7], np.uint64), request_ids=keys,
                                steps=0)
    np.testing.assert_array_equal(tokens, ref)
    parsed = vllm.RejectionSampler.parse_output(tokens, V)
    for b in range(B):  # round trip: the accepted drafts, then one token, then -1 padding
        k = len(parsed[b]) - 1
        assert parsed[b][:k] == lists[b][:k] and 0 <= parsed[b][k] < V and (tokens[b, k + 1:] == -1).all()
    assert vllm.RejectionSampler.parse_output(tokens, V, discard_req_indices=[1])[1] == []


def test_steps_count_per_request_and_a_request_is_the_same_alone_or_in_a_batch():
    rng = np.random.default_rng(12)
    lists = [[3, 1], [2, 2, 2], [0]]
    m = make_metadata(lists)
    V = 9
    logits = rng.standard_normal((len(m.draft_token_ids) + 3, V))
    sm = sampling_metadata([1.0, 0.9, 1.1], generators={1: Generator(5)})
    s = vllm.RejectionSampler()
    first = s(m, None, logits, sm, request_ids=[10, 11, 12]).sampled_token_ids
    second = s(m, None, logits, sm, request_ids=[10, 11, 12]).sampled_token_ids
    np.testing.assert_array_equal(first, vllm.RejectionSampler().forward(m, None, logits, sm, request_ids=[10, 11, 12],
                                                                         steps=0).sampled_token_ids)
    np.testing.assert_array_equal(second, vllm.RejectionSampler().forward(m, None, logits, sm, request_ids=[10, 11, 12],
                                                                          steps=1).sampled_token_ids)
    # request 11 alone, at batch index 0 with its generator there: the same tokens as in the batch
    rows = slice(int(m.bonus_logits_indices[0]) + 1, int(m.bonus_logits_indices[1]) + 1)
    alone = vllm.RejectionSampler().forward(make_metadata([lists[1]]), None, np.ascontiguousarray(logits[rows]),
                                            sampling_metadata([0.9], generators={0: Generator(5)}),
                                            request_ids=[11], steps=0).sampled_token_ids
    assert alone[0].tolist() == first[1].tolist()


def test_all_greedy_equals_greedy_target_only_decoding():
    rng = np.random.default_rng(13)
    lists = [[int(x) for x in rng.integers(0, 5, n)] for n in (4, 1, 0, 3, 2)]
    m = make_metadata(lists)
    logits = rng.standard_normal((len(m.draft_token_ids) + 5, 5))
    sm = sampling_metadata(None)  # vLLM: temperature None when every request is greedy
    out = vllm.RejectionSampler().forward(m, None, logits, sm, request_ids=range(5)).sampled_token_ids
    accepted = 0
    for b, drafts in enumerate(lists):
        rows = logits[m.bonus_logits_indices[b] - len(drafts): m.bonus_logits_indices[b] + 1]
        expected = []
        for i in range(len(drafts) + 1):
            expected.append(int(rows[i].argmax()))
            if i == len(drafts) or drafts[i] != expected[-1]:
                break
        accepted += len(expected) - 1
        assert vllm.parse_output(out[b:b + 1], 5)[0] == expected
    assert accepted > 0  # some drafts matched the argmax


def test_all_random_never_takes_the_greedy_path():
    # all_random with temperatures set: even a tiny temperature is sampled (vLLM skips its greedy kernel)
    m = make_metadata([[0]] * 400)
    logits = np.tile(np.log(np.array([[0.5, 0.5, 1e-9], [1 / 3, 1 / 3, 1 / 3]])), (400, 1))
    sm = SimpleNamespace(temperature=np.full(400, 1.0), all_greedy=False, all_random=True, top_k=None, top_p=None,
                         generators={})
    out = vllm.RejectionSampler().forward(m, None, logits, sm, request_ids=range(400)).sampled_token_ids
    assert set(out[:, 0].tolist()) == {0, 1}  # greedy would always emit 0 (the lowest argmax)


def test_bad_metadata_is_refused_by_name():
    m = make_metadata([[1, 2], [3]])
    logits = np.zeros((5, 4), np.float32)
    sm = sampling_metadata([1.0, 1.0])
    s = vllm.RejectionSampler()
    with pytest.raises(ValueError, match="request_ids"):
        s.forward(m, None, logits, sm)
    with pytest.raises(ValueError, match="request_ids"):
        s.forward(m, None, logits, sm, request_ids=[1, 1])
    bad = make_metadata([[1, 2], [3]])
    bad.cu_num_draft_tokens = np.array([2, 4], np.int32)
    with pytest.raises(ValueError, match="metadata.cu_num_draft_tokens"):
        s.forward(bad, None, logits, sm, request_ids=[0, 1])
    bad = make_metadata([[1, 2], [3]])
    bad.bonus_logits_indices = np.array([0, 4], np.int32)
    with pytest.raises(ValueError, match="metadata.bonus_logits_indices"):
        s.forward(bad, None, logits, sm, request_ids=[0, 1])
    with pytest.raises(TypeError, match=r"sampling_metadata.generators\[0\]"):
        s.forward(m, None, logits, sampling_metadata([1.0, 1.0], generators={0: "seed"}), request_ids=[0, 1])
    with pytest.raises(ValueError, match="sampling_metadata.temperature"):
        s.forward(m, None, logits, SimpleNamespace(temperature=None, all_greedy=False, all_random=False, top_k=None,
                                                   top_p=None, generators={}), request_ids=[0, 1])
    with pytest.raises(TypeError, match="target_logits"):
        s.forward(m, None, logits.astype(np.float16), sm, request_ids=[0, 1])


def test_install_replaces_a_runners_rejection_sampler():
    m = make_metadata([[1], [2, 3]])
    logits = np.random.default_rng(3).standard_normal((5, 6))
    runner = SimpleNamespace(rejection_sampler="vllm's", input_batch=SimpleNamespace(req_ids=["x", "y"]))
    s = vllm.RejectionSampler(default_seed=3)
    assert s.install(runner) == "vllm's"
    out = runner.rejection_sampler(m, None, logits, sampling_metadata([0.9, 1.0])).sampled_token_ids
    ref = vllm.RejectionSampler(default_seed=3).forward(m, None, logits, sampling_metadata([0.9, 1.0]),
                                                        request_ids=["x", "y"], steps=0).sampled_token_ids
    np.testing.assert_array_equal(out, ref)
    assert runner.rejection_sampler.parse_output(out, 6) == vllm.parse_output(out, 6)

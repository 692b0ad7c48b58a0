"""specdec.Decoder: the step decoder over the reference models from Python.

- Output invariance (position-keyed target samples): with Greedy or SampleAndMatch, every chain
  drafter (the draft model, n-gram lookup, suffix chains) gives token for token what target-only
  decoding (gamma 0) gives with the same seed, alone and in a mixed batch, on every backend; the
  round-keyed variant must differ (control).
- The emitted law: the first two tokens of lossless rules (with a draft model and with model-free
  drafters, which hand strict a one-hot q) pass a chi-squared test against the target's exact law
  (false-failure rate about 1e-4 each); Lenient(0.2) and the draft's own law must be rejected.
- Trees and beams over the draft model: EAGLE-2's dynamic tree gives target-only decoding's tokens
  (Greedy, SampleAndMatch) and the target's law (TargetOnly); MTAD at tau = 1 emits the target's
  law, at tau = 0 the beams' (control); MTAD's requests are batch-invariant.
- Events: tokens add up to `tokens(h)`, a finished request is reported once, counters agree.
- Bad input raises ValueError/TypeError naming the argument; two threads step two decoders at once.
"""

import threading

import numpy as np
import pytest

import specdec
from specdec.decoder import ngram_pair, random_markov_model
from conftest import chi2_critical, chi2_statistic

V = 6
TARGET = random_markov_model(V, 1, seed=11, concentration=0.7)
DRAFT = random_markov_model(V, 1, seed=12, concentration=0.7)
CHAIN_DRAFTERS = ("model", "ngram", "suffix")


def decode(rule, requests, backend=None, **common):
    """Adds every request (a dict of add()'s arguments over `common`) to one decoder and runs it."""
    d = specdec.Decoder(TARGET, DRAFT, rule=rule, backend=backend)
    handles = [d.add(r.pop("prompt"), **{**common, **r}) for r in (dict(x) for x in requests)]
    out = d.run()
    return [out[h] for h in handles]


@pytest.mark.parametrize("rule", [specdec.SampleAndMatch(), specdec.Greedy()], ids=["sample-and-match", "greedy"])
def test_any_chain_drafter_gives_target_only_decodings_tokens(rule, backend):
    temperature = 0.0 if isinstance(rule, specdec.Greedy) else 0.9
    for seed in range(4):
        common = dict(seed=seed, request_id=7, max_new_tokens=40, temperature=temperature)
        alone = decode(rule, [dict(prompt=[1, 2], gamma=0)], backend, **common)[0]
        assert len(alone) == 40
        # every drafter, each in a batch with the others and with unrelated requests
        batch = [dict(prompt=[1, 2], gamma=g, drafter=dr) for dr in CHAIN_DRAFTERS for g in (1, 3, 6)]
        batch += [dict(prompt=[3], gamma=2, request_id=99, seed=seed + 100, drafter="ngram")]
        for tokens in decode(rule, batch, backend, **common)[:-1]:
            np.testing.assert_array_equal(tokens, alone)


def test_round_keyed_samples_change_with_the_drafter():
    """Control: keyed by the round, sample-and-match's tokens depend on where rounds start."""
    differs = 0
    for seed in range(4):
        common = dict(seed=seed, request_id=7, max_new_tokens=40, sample_keys="round")
        alone, drafted = decode(specdec.SampleAndMatch(), [dict(prompt=[1, 2], gamma=0), dict(prompt=[1, 2], gamma=4)],
                                **common)
        differs += not np.array_equal(alone, drafted)
    assert differs > 0


def test_greedy_target_only_is_the_targets_argmax_chain():
    tokens = decode(specdec.Greedy(), [dict(prompt=[2], gamma=0)], temperature=0.0, max_new_tokens=20)[0]
    context = [2]
    for t in tokens:
        assert t == int(np.argmax(TARGET.next_probs(context)))
        context.append(int(t))
    # a suffix tree verified as a tree (target-only and greedy trees read no q) gives the same tokens
    tree = decode(specdec.Greedy(), [dict(prompt=[2], gamma=4, drafter="suffix_tree")], temperature=0.0,
                  max_new_tokens=20)[0]
    np.testing.assert_array_equal(tree, tokens)


def first_two_law(model, prompt):
    p1 = model.next_probs(prompt)
    return np.concatenate([p1[a] * model.next_probs(prompt + [a]) for a in range(V)])


def first_two_counts(decoder_rule, drafter, n=4000, **add):
    """The first two tokens' counts of n requests (add's `rule` overrides the decoder's)."""
    tokens = decode(decoder_rule, [dict(prompt=[1], request_id=i, **add) for i in range(n)], seed=5, gamma=2,
                    max_new_tokens=2, drafter=drafter)
    return np.bincount([t[0] * V + t[1] for t in tokens], minlength=V * V)


@pytest.mark.parametrize("rule,drafter", [(specdec.Strict(), "model"), (specdec.Strict(), "ngram"),
                                          (specdec.Strict(), "suffix"), (specdec.Block(), "model"),
                                          (specdec.SampleAndMatch(), "model"), (specdec.SampleAndMatch(), "suffix")])
def test_lossless_rules_emit_the_targets_law(rule, drafter):
    stat, dof = chi2_statistic(first_two_counts(rule, drafter), first_two_law(TARGET, [1]))
    assert stat < chi2_critical(dof), f"chi-squared {stat:.1f} with {dof} degrees of freedom"


def test_negative_controls_lenient_and_the_drafts_law_are_rejected():
    law = first_two_law(TARGET, [1])
    stat, dof = chi2_statistic(first_two_counts(specdec.Lenient(0.2), "model"), law)
    assert stat > chi2_critical(dof), f"Lenient(0.2) passed as the target's law (chi-squared {stat:.1f})"
    counts = first_two_counts(specdec.Strict(), "model")
    draft_law = first_two_law(DRAFT, [1])
    expected = draft_law * counts.sum()
    stat = float(np.sum((counts - expected)[expected >= 5] ** 2 / expected[expected >= 5]))
    assert stat > chi2_critical(int((expected >= 5).sum()) - 1), "strict's output passed as the draft's law"


@pytest.mark.parametrize("rule", [specdec.SampleAndMatch(), specdec.Greedy()], ids=["sample-and-match", "greedy"])
def test_trees_give_target_only_decodings_tokens(rule, backend):
    """EAGLE-2's dynamic tree over the draft model and the suffix tree, verified as trees: the same output
    (sample-and-match's sample at a node is addressed by its depth, the output position it decides)."""
    temperature = 0.0 if isinstance(rule, specdec.Greedy) else 0.9
    for seed in range(3):
        common = dict(seed=seed, request_id=7, max_new_tokens=30, temperature=temperature)
        alone = decode(rule, [dict(prompt=[1, 2], gamma=0)], backend, **common)[0]
        batch = [dict(prompt=[1, 2], gamma=g, drafter="tree", tree_width=w, tree_nodes=n)
                 for g, w, n in ((1, 2, 2), (3, 2, 5), (5, 3, 12))]
        batch += [dict(prompt=[1, 2], gamma=6, drafter="suffix_tree", suffix_min_probability=0.01)]
        batch += [dict(prompt=[3], gamma=2, request_id=99, drafter="mtad")]
        for tokens in decode(rule, batch, backend, **common)[:-1]:
            np.testing.assert_array_equal(tokens, alone)


@pytest.mark.parametrize("rule", [specdec.SampleAndMatch(), specdec.Greedy()], ids=["sample-and-match", "greedy"])
def test_static_trees_give_target_only_decodings_tokens(rule, backend):
    temperature = 0.0 if isinstance(rule, specdec.Greedy) else 0.9
    common = dict(seed=4, request_id=7, max_new_tokens=30, temperature=temperature)
    alone = decode(rule, [dict(prompt=[1, 2], gamma=0)], backend, **common)[0]
    batch = [dict(prompt=[1, 2], gamma=g, drafter="static_tree", tree_width=w) for g, w in ((1, 3), (2, 2), (3, 2))]
    for tokens in decode(rule, batch, backend, **common):
        np.testing.assert_array_equal(tokens, alone)


@pytest.mark.parametrize("rule", [specdec.Strict(), specdec.KSeq(), specdec.RecursiveRejection(), specdec.TargetOnly(),
                                  specdec.SampleAndMatch()], ids=lambda r: type(r).__name__)
def test_static_trees_emit_the_targets_law_under_each_tree_rule(rule):
    """Each tree rule on the candidates it needs (i.i.d. for multi-step sampling and K-SEQ, without
    replacement for recursive rejection, the top-k of q for the rules that read no q)."""
    counts = first_two_counts(specdec.Strict(), "static_tree", rule=rule, tree_width=2, temperature=0.8)
    law = first_two_law_at(TARGET, [1], 0.8)
    stat, dof = chi2_statistic(counts, law)
    assert stat < chi2_critical(dof), f"chi-squared {stat:.1f} with {dof} degrees of freedom"
    if isinstance(rule, specdec.Strict):  # control: the same counts are not the draft's law
        stat, dof = chi2_statistic(counts, first_two_law_at(DRAFT, [1], 0.8))
        assert stat > chi2_critical(dof), "static-tree output passed as the draft's law"


def test_static_tree_arguments_are_checked():
    d = specdec.Decoder(TARGET, DRAFT)
    with pytest.raises(TypeError, match="Lenient and Block verify chains only"):
        d.add([1], drafter="static_tree", rule=specdec.Lenient(0.5))
    with pytest.raises(ValueError, match="tree_width must be >= 1"):
        d.add([1], drafter="static_tree", tree_width=0)
    with pytest.raises(ValueError, match="not below the vocabulary size"):
        d.add([1], drafter="static_tree", tree_width=V + 1)
    with pytest.raises(ValueError, match="needs a draft model"):
        specdec.Decoder(TARGET).add([1], drafter="static_tree")


def first_two_law_at(model, prompt, temperature):
    """The law of the first two tokens of `model` warped at `temperature`."""
    def row(context):
        return specdec.softmax(model.next_logits(context).astype(np.float64), temperature)
    p1 = row(prompt)
    return np.concatenate([p1[a] * row(prompt + [a]) for a in range(V)])


def test_eagle_trees_under_target_only_emit_the_targets_law():
    counts = first_two_counts(specdec.Strict(), "tree", rule=specdec.TargetOnly(), tree_width=3, tree_nodes=6)
    stat, dof = chi2_statistic(counts, first_two_law(TARGET, [1]))
    assert stat < chi2_critical(dof), f"chi-squared {stat:.1f} with {dof} degrees of freedom"


def test_mtad_at_tau_one_emits_the_targets_law_and_at_tau_zero_the_beams():
    """MTAD's joint rule accepts a prefix iff min(1, p/q) > tau: at tau = 1 never, so every token is
    the target's sample (its law exactly); at tau = 0 always (rows without zeros), so the tokens are
    the beams' and the law is not the target's (control)."""
    law = first_two_law(TARGET, [1])
    stat, dof = chi2_statistic(first_two_counts(specdec.Strict(), "mtad", tau=1.0, beams=3), law)
    assert stat < chi2_critical(dof), f"tau = 1: chi-squared {stat:.1f} with {dof} degrees of freedom"
    stat, dof = chi2_statistic(first_two_counts(specdec.Strict(), "mtad", tau=0.0, beams=3), law)
    assert stat > chi2_critical(dof), f"tau = 0 passed as the target's law (chi-squared {stat:.1f})"


def test_mtad_requests_are_batch_invariant_and_accept_all_at_tau_zero():
    requests = [dict(prompt=[1 + i % 3], request_id=i, seed=i, gamma=1 + i % 4, beams=1 + i % 3) for i in range(8)]
    together = decode(specdec.Strict(), requests, drafter="mtad", tau=0.3, max_new_tokens=20)
    for r, tokens in zip(requests, together):
        np.testing.assert_array_equal(decode(specdec.Strict(), [r], drafter="mtad", tau=0.3, max_new_tokens=20)[0],
                                      tokens)
    d = specdec.Decoder(TARGET, DRAFT)
    d.add([1], gamma=3, drafter="mtad", tau=0.0, max_new_tokens=16)
    for e in d.step():
        assert e.drafted == e.verified == 3 and len(e.tokens) == 4


def test_events_add_up_to_the_requests_tokens_and_counters():
    d = specdec.Decoder(TARGET, DRAFT)
    a = d.add([1, 2], gamma=3, max_new_tokens=25, seed=1)
    b = d.add([4], gamma=2, max_new_tokens=10, seed=2, drafter="ngram", stop_tokens=[])
    seen = {a: [], b: []}
    finished = {}
    steps = 0
    while d.active:
        steps += 1
        for e in d.step():
            assert e.request not in finished, "a finished request was reported again"
            seen[e.request].append(e.tokens)
            assert e.tokens.dtype == np.int32 and ((e.tokens >= 0) & (e.tokens < V)).all()
            assert e.verified <= e.drafted
            if e.finished is not None:
                finished[e.request] = e.finished
                np.testing.assert_array_equal(np.concatenate(seen[e.request]), d.tokens(e.request))
                s = d.stats(e.request)
                assert s["emitted"] == len(d.tokens(e.request)) == (25 if e.request == a else 10)
                assert s["accepted"] <= s["drafted"]
    assert finished == {a: "length", b: "length"}
    assert steps >= 25 / 4


def test_stop_tokens_and_cancel():
    d = specdec.Decoder(TARGET, DRAFT, rule=specdec.Greedy())
    free = decode(specdec.Greedy(), [dict(prompt=[1], gamma=3)], temperature=0.0, max_new_tokens=30)[0]
    stop = int(free[5])
    first = int(np.flatnonzero(free == stop)[0])
    h = d.add([1], gamma=3, max_new_tokens=30, temperature=0.0, stop_tokens=[stop])
    c = d.add([2], gamma=3, max_new_tokens=30)
    d.cancel(c)
    out = {}
    while d.active:
        for e in d.step():
            if e.finished is not None:
                out[e.request] = (e.finished, d.tokens(e.request))
    assert out[h][0] == "stop_token"
    np.testing.assert_array_equal(out[h][1], free[:first + 1])
    assert out[c][0] == "cancelled" and len(out[c][1]) == 0


def test_ngram_models_on_text_encode_decode_and_decode_with_every_drafter():
    text = ("the cat sat on the mat and the dog sat on the log . " * 20 + "\n\n") * 3
    target, draft = ngram_pair([text], target_order=3, draft_order=2)
    prompt = target.encode("the cat sat on")
    assert target.decode(prompt) == "the cat sat on"
    d = specdec.Decoder(target, draft, rule=specdec.Greedy())
    handles = {dr: d.add(prompt, gamma=4, max_new_tokens=12, temperature=0.0, drafter=dr) for dr in CHAIN_DRAFTERS}
    out = d.run()
    texts = {dr: target.decode(out[h]) for dr, h in handles.items()}
    assert len(set(texts.values())) == 1, texts
    context = list(prompt)
    for _ in range(12):
        context.append(int(np.argmax(target.next_probs(context))))
    assert texts["model"] == target.decode(context[len(prompt):])
    assert texts["model"].startswith("the ")


def test_without_a_draft_model_only_model_free_drafters_run():
    d = specdec.Decoder(TARGET, rule=specdec.SampleAndMatch())
    with pytest.raises(ValueError, match="needs a draft model"):
        d.add([1], gamma=2)
    d.add([1], gamma=0, max_new_tokens=3)
    d.add([1], gamma=4, drafter="suffix", max_new_tokens=3)
    assert [len(t) for t in d.run().values()] == [3, 3]


def test_bad_input_is_refused_naming_the_argument():
    d = specdec.Decoder(TARGET, DRAFT)
    with pytest.raises(ValueError, match="prompt is empty"):
        d.add([])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        d.add([V])
    with pytest.raises(ValueError, match="prompt"):
        d.add([-1])
    with pytest.raises(ValueError, match="drafter"):
        d.add([1], drafter="eagle")
    with pytest.raises(ValueError, match="gamma"):
        d.add([1], gamma=-1)
    with pytest.raises(ValueError, match="min_n|max_n"):
        d.add([1], drafter="ngram", ngram=(3, 2))
    with pytest.raises(ValueError, match="min_n"):
        d.add([1], drafter="ngram", ngram=(0, 2))
    with pytest.raises(ValueError, match="suffix_tree"):
        d.add([1], drafter="suffix_tree")  # the decoder's Strict reads q, a suffix tree writes none
    with pytest.raises(ValueError, match="temperature"):
        d.add([1], temperature=-1.0)
    with pytest.raises(ValueError, match="sample_keys"):
        d.add([1], sample_keys="step")
    with pytest.raises(ValueError, match="'tree' drafts no q"):
        d.add([1], drafter="tree")  # Strict reads q; the dynamic tree's siblings are not draws from q
    with pytest.raises(ValueError, match="drop rule"):
        d.add([1], drafter="mtad", rule=specdec.Strict())
    with pytest.raises(ValueError, match="tau"):
        d.add([1], drafter="mtad", tau=1.5)
    with pytest.raises(ValueError, match="width|beam"):
        d.add([1], drafter="mtad", beams=0)
    with pytest.raises(ValueError, match="tree_width"):
        d.add([1], drafter="tree", rule=specdec.TargetOnly(), tree_width=0)
    with pytest.raises(ValueError, match="needs a draft model"):
        specdec.Decoder(TARGET, rule=specdec.Greedy()).add([1], drafter="mtad")
    with pytest.raises(TypeError, match="rule"):
        specdec.Decoder(TARGET, DRAFT, rule=specdec.TargetOnly())
    with pytest.raises(ValueError, match="vocabulary"):
        specdec.Decoder(TARGET, random_markov_model(V + 1, 1))
    with pytest.raises(ValueError, match="backend"):
        specdec.Decoder(TARGET, DRAFT, backend="cuda")
    with pytest.raises(ValueError, match="finished|unknown"):
        d.cancel(12345)
    assert d.active == 0  # nothing refused was added


def test_two_threads_step_two_decoders_at_once():
    requests = [dict(prompt=[1, 2], request_id=i, gamma=3) for i in range(40)]
    expected = decode(specdec.Strict(), requests, seed=3, max_new_tokens=50)
    results = [None, None]

    def run(k):
        results[k] = decode(specdec.Strict(), requests, seed=3, max_new_tokens=50)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        for a, b in zip(r, expected):
            np.testing.assert_array_equal(a, b)


# ---- models written in Python -------------------------------------------------------------------------


def run_events(target, draft, rule, requests, backend=None):
    d = specdec.Decoder(target, draft, rule=rule, backend=backend)
    handles = [d.add(r.pop("prompt"), **r) for r in (dict(x) for x in requests)]
    events = []
    while d.active:
        events += [(e.request, e.tokens.tolist(), e.finished, int(e.status), e.drafted, e.verified) for e in d.step()]
    return handles, events


def run_to_finish(d):
    """Steps `d` until no request runs; each request's (finished, status) at its end."""
    finished = {}
    while d.active:
        for e in d.step():
            if e.finished:
                finished[e.request] = (e.finished, e.status)
    return finished


def test_a_python_model_decodes_exactly_as_the_model_it_wraps(backend):
    """python_model(m.next_logits) hands the decoder the very floats m computes: every event equals."""
    py_target = specdec.decoder.python_model(TARGET.next_logits, V)
    py_draft = specdec.decoder.python_model(DRAFT.next_logits, V)
    requests = [dict(prompt=[1, 2], gamma=g, drafter=dr, seed=s, request_id=s, max_new_tokens=24, temperature=0.9)
                for s, (dr, g) in enumerate([("model", 3), ("ngram", 4), ("suffix", 2), ("model", 0)])]
    for rule in (specdec.Strict(), specdec.SampleAndMatch(), specdec.Greedy()):
        want = run_events(TARGET, DRAFT, rule, requests, backend)
        assert run_events(py_target, py_draft, rule, requests, backend) == want
        assert run_events(py_target, DRAFT, rule, requests, backend) == want


def test_a_failing_python_model_ends_its_request_alone_with_a_warning():
    def flaky(context):
        if len(context) >= 6 and context[0] == 5:  # only the request whose prompt starts with 5
            raise KeyError("the model broke")
        return TARGET.next_logits(context)

    bad, good, d = bad_and_good_requests(specdec.decoder.python_model(flaky, V), "the model broke")
    assert good[1] == ("length", specdec.Status.OK) and len(d.tokens(good[0])) == 20


def bad_and_good_requests(target, text):
    """Runs an n-gram request whose prompt starts with 5 and one whose prompt does not on `target`,
    warned with `text`; checks the first ends with INVALID_ROW. Returns both (handle, (finished,
    status)) and the decoder."""
    d = specdec.Decoder(target, None, rule=specdec.SampleAndMatch())
    bad = d.add([5, 1], drafter="ngram", max_new_tokens=20, seed=1)
    good = d.add([1, 2], drafter="ngram", max_new_tokens=20, seed=2, request_id=1)
    with pytest.warns(RuntimeWarning, match=text):
        finished = run_to_finish(d)
    assert finished[bad][0] == "error" and finished[bad][1] & specdec.Status.INVALID_ROW
    return (bad, finished[bad]), (good, finished[good]), d


@pytest.mark.parametrize("result, text", [(lambda c: np.zeros(V + 1), "7 logits, not vocab_size = 6"),
                                          (lambda c: np.zeros(V, np.int64), "not float32 or float64"),
                                          (lambda c: "logits", "no 1-d")])
def test_a_python_model_returning_the_wrong_thing_is_reported(result, text):
    first_step_fails(specdec.decoder.python_model(result, V), text)


def first_step_fails(model, text):
    """A Greedy request on `model` ends with "error" in its first step, and step() warns with `text`."""
    d = specdec.Decoder(model, None, rule=specdec.Greedy())
    h = d.add([1], gamma=0, max_new_tokens=3)
    with pytest.warns(RuntimeWarning, match=text):
        events = d.step()
    assert events[0].request == h and events[0].finished == "error"


def test_python_model_arguments_are_checked():
    with pytest.raises(TypeError, match="next_logits"):
        specdec.decoder.python_model(3, V)
    with pytest.raises(ValueError, match="vocab_size"):
        specdec.decoder.python_model(TARGET.next_logits, 0)
    with pytest.raises(ValueError, match="vocabulary"):
        specdec.Decoder(specdec.decoder.python_model(TARGET.next_logits, V + 1), DRAFT)


# ---- KV-cached models written in Python (python_sequence_model) -------------------------------------

class CachedModel:
    """A KV-cached model in Python over a reference model: each sequence's tokens are its "cache";
    forward computes only the rows asked for and records what it was sent."""

    def __init__(self, model, fail_forward=None, fail_rollback=None):
        self.model, self.seqs, self.calls, self.appended = model, {}, [], 0
        self.fail_forward, self.fail_rollback = fail_forward, fail_rollback

    def forward(self, appends):
        self.calls.append([(s, t.tolist(), r) for s, t, r in appends])
        rows = []
        for s, tokens, n in appends:
            assert tokens.dtype == np.int32
            seq = self.seqs.setdefault(s, [])
            seq += tokens.tolist()
            self.appended += len(tokens)
            if self.fail_forward and self.fail_forward(seq):
                raise KeyError("the cached model broke")
            rows += [self.model.next_logits(np.array(seq[:len(seq) - n + k + 1], np.int32)) for k in range(n)]
        return np.array(rows, np.float32).reshape(-1, V)

    def rollback(self, s, n):
        if self.fail_rollback and self.fail_rollback(self.seqs[s]):
            raise RuntimeError("rollback refused")
        del self.seqs[s][len(self.seqs[s]) - n:]

    def release(self, s):
        self.seqs.pop(s, None)


SEQUENCE_REQUESTS = [dict(prompt=[1, 2, 3], gamma=g, drafter=dr, seed=s, request_id=s, max_new_tokens=24, temperature=0.9)
                     for s, (dr, g) in enumerate([("model", 3), ("ngram", 4), ("suffix", 2), ("model", 0), ("model", 5)])]


def test_a_python_sequence_model_decodes_exactly_as_the_model_it_caches(backend):
    """The decoder's chains on a KV-cached Python model equal those on the reference model it wraps."""
    for rule in (specdec.Strict(), specdec.SampleAndMatch(), specdec.Greedy()):
        want = run_events(TARGET, DRAFT, rule, SEQUENCE_REQUESTS, backend)
        target, draft = CachedModel(TARGET), CachedModel(DRAFT)
        seq_t, seq_d = (specdec.decoder.python_sequence_model(m, V) for m in (target, draft))
        assert run_events(seq_t, seq_d, rule, SEQUENCE_REQUESTS, backend) == want
        assert run_events(seq_t, DRAFT, rule, SEQUENCE_REQUESTS, backend) == want
        assert run_events(TARGET, seq_d, rule, SEQUENCE_REQUESTS, backend) == want
        assert not target.seqs and not draft.seqs, "every finished request's sequence is released"


def test_a_python_sequence_model_is_sent_each_token_once_per_forward_of_the_batch():
    target, draft = CachedModel(TARGET), CachedModel(DRAFT)
    d = specdec.Decoder(specdec.decoder.python_sequence_model(target, V), specdec.decoder.python_sequence_model(draft, V),
                        rule=specdec.SampleAndMatch())
    for s in range(4):
        d.add([1, 2, 3], gamma=3, seed=s, request_id=s, max_new_tokens=30)
    steps = 0
    while d.active:
        d.step()
        steps += 1
    assert len(target.calls) <= steps, "one target call per step"
    assert max(len(c) for c in target.calls) == 4, "the four requests share the target's calls"
    assert max(len(c) for c in draft.calls) == 4, "and the draft's"
    for model in (target, draft):  # the prompt once; then at most the pending token and gamma drafts, never the context
        seen = set()
        for call in model.calls:
            for seq, tokens, rows in call:
                assert len(tokens) <= (3 + 3 if seq not in seen else 3 + 1) and rows <= 3 + 1, (seq, tokens, rows)
                seen.add(seq)


def test_a_failing_python_sequence_model_ends_the_requests_it_scored_with_a_warning():
    target = CachedModel(TARGET, fail_forward=lambda seq: seq[0] == 5 and len(seq) >= 8)
    _, good, _ = bad_and_good_requests(specdec.decoder.python_sequence_model(target, V), "the cached model broke")
    assert good[1][0] == "error", "a failed forward gives NaN rows to every request it scored"


def test_a_failed_rollback_ends_that_request_alone():
    target = CachedModel(TARGET, fail_rollback=lambda seq: seq[0] == 5)
    d = specdec.Decoder(specdec.decoder.python_sequence_model(target, V), DRAFT, rule=specdec.Strict())
    bad = d.add([5, 1], gamma=4, max_new_tokens=40, seed=1)
    good = d.add([1, 2], gamma=4, max_new_tokens=40, seed=2, request_id=1)
    with pytest.warns(RuntimeWarning, match="rollback: RuntimeError: rollback refused"):
        finished = run_to_finish(d)
    assert finished[bad][0] == "error" and finished[bad][1] & specdec.Status.INVALID_ROW
    assert finished[good] == ("length", specdec.Status.OK)


@pytest.mark.parametrize("result, text", [(lambda a: np.zeros((1, V + 1), np.float32), r"shape \(1, 6\)"),
                                          (lambda a: np.zeros((1, V), np.int64), "not float32 or float64"),
                                          (lambda a: None, "no C-contiguous")])
def test_a_python_sequence_model_returning_the_wrong_thing_is_reported(result, text):
    class Wrong(CachedModel):
        def forward(self, appends):
            return result(appends)

    first_step_fails(specdec.decoder.python_sequence_model(Wrong(TARGET), V), text)


def test_python_sequence_model_arguments_and_limits_are_checked():
    with pytest.raises(TypeError, match="no callable 'rollback'"):
        specdec.decoder.python_sequence_model(type("M", (), {"forward": lambda s, a: None})(), V)
    with pytest.raises(ValueError, match="vocab_size"):
        specdec.decoder.python_sequence_model(CachedModel(TARGET), 0)
    seq = specdec.decoder.python_sequence_model(CachedModel(TARGET), V)
    with pytest.raises(ValueError, match="vocabulary"):
        specdec.Decoder(seq, random_markov_model(V + 1, 1))
    d = specdec.Decoder(seq, specdec.decoder.python_sequence_model(CachedModel(DRAFT), V), rule=specdec.Greedy())
    with pytest.raises(ValueError, match="tree"):
        d.add([1, 2], drafter="suffix_tree")
    for drafter in ("tree", "mtad"):
        with pytest.raises(ValueError, match="stateless draft model"):
            d.add([1, 2], drafter=drafter, rule=None)
    with pytest.raises(ValueError, match="outside the vocabulary|a token"):
        d.add([V], gamma=0)
        d.run()

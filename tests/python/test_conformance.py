"""specdec.conformance: the C++ conformance kit on Python verifiers, called directly (no files): it
passes specdec's own verifier and a correct NumPy verifier, and catches a broken one."""

import numpy as np
import pytest

import specdec
from specdec import conformance

pytestmark = pytest.mark.skipif(not conformance.AVAILABLE,
                                reason="specdec.conformance was not built (Boost.Math not found, "
                                       "or SPECDEC_PYTHON_CONFORMANCE=OFF)")

# small runs: a few thousand requests per law configuration, a short impossible-token check
SMALL = dict(law_requests=4000, batch_size=1000, independence_pairs=2000, impossible_token_trials=2**16, alpha=1e-4)


def test_specdec_strict_passes_the_whole_kit():
    r = conformance.check_chain_verifier(conformance.specdec_verifier(specdec.Strict()), "lossless",
                                         name="specdec strict", **SMALL)
    assert r.passed, r.text
    for check in ("exact_law/", "determinism", "batch_invariance", "independence/", "bad_input/", "impossible_tokens"):
        assert any(name.startswith(check) for name in r.checks), (check, list(r.checks))
    assert all(r.checks.values())


def test_lenient_is_caught_claiming_lossless_and_passes_its_stated_law():
    lenient = conformance.specdec_verifier(specdec.Lenient(0.3))
    r = conformance.check_chain_verifier(lenient, "lossless", only=("exact_law",), **SMALL)
    assert not r.passed and r.checks and not any(r.checks.values()), r.text
    r = conformance.check_chain_verifier(lenient, specdec.Lenient(0.3), only=("exact_law",), **SMALL)
    assert r.passed, r.text


def numpy_strict(ignore_q=False):
    """Speculative sampling in NumPy, seeded by (seed, request id, step). With `ignore_q` it accepts
    x when u < p(x), a common bug (the test needs q(x) too), which is not lossless."""

    def verify(inputs):
        nd, V = inputs.num_drafts, inputs.vocab_size
        B = len(nd)
        tokens = np.full((B, (nd.max() if B else 0) + 1), -1, np.int32)
        reported = np.zeros(B, bool)
        for b in range(B):
            rng = np.random.default_rng([int(inputs.seeds[b]), int(inputs.request_ids[b]), int(inputs.steps[b])])
            o = int(inputs.offsets[b])
            out = []
            for i in range(nd[b] + 1):
                p = inputs.target_rows[o + b + i].astype(np.float64)
                if i == nd[b]:  # every draft accepted: the bonus token
                    out.append(rng.choice(V, p=p / p.sum()))
                    break
                x = int(inputs.draft_tokens[o + i])
                q = inputs.draft_rows[o + i].astype(np.float64)
                u = rng.random()
                if (u < p[x]) if ignore_q else (u * q[x] < p[x]):
                    out.append(x)
                    continue
                residual = np.maximum(p - q, 0.0)
                residual = residual if residual.sum() > 0 else p
                out.append(rng.choice(V, p=residual / residual.sum()))
                break
            tokens[b, :len(out)] = out
        return tokens, reported

    return verify


# the bad-input catalogue is not handled by this small verifier
CHECKS = ("exact_law", "determinism", "batch_invariance", "independence")


def test_a_correct_numpy_verifier_passes():
    r = conformance.check_chain_verifier(numpy_strict(), "lossless", name="numpy strict", only=CHECKS, **SMALL)
    assert r.passed, r.text
    assert sum(name.startswith("exact_law/") for name in r.checks) >= 3 and "determinism" in r.checks


def test_a_broken_numpy_verifier_is_caught():
    r = conformance.check_chain_verifier(numpy_strict(ignore_q=True), "lossless", name="numpy, q ignored",
                                         only=CHECKS, **SMALL)
    assert not r.passed
    laws = {name: ok for name, ok in r.checks.items() if name.startswith("exact_law/")}
    assert laws and not any(laws.values()), r.text  # the law is wrong on every configuration
    assert r.checks["determinism"] and r.checks["batch_invariance"]  # seeded correctly: only the law is wrong


def test_results_as_token_lists_and_a_verify_result_are_read():
    strict = numpy_strict()

    def as_lists(inputs):
        tokens, reported = strict(inputs)
        return [[int(t) for t in row if t != -1] for row in tokens], False  # one flag for all requests

    r = conformance.check_chain_verifier(as_lists, "lossless", only=("exact_law",), **SMALL)
    assert r.passed, r.text


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="guarantee"):
        conformance.check_chain_verifier(numpy_strict(), "fast")
    with pytest.raises(TypeError, match="verifier"):
        conformance.check_chain_verifier(None, "lossless")


def test_a_verifier_returning_the_wrong_shape_is_an_error():
    def short(inputs):
        return np.full((1, 1), -1, np.int32), np.zeros(1, bool)  # one row whatever the batch

    with pytest.raises(ValueError, match="verifier"):
        conformance.check_chain_verifier(short, "lossless", only=("determinism",), **SMALL)


def test_a_verifier_that_raises_stops_the_run():
    calls = []

    def broken(inputs):
        calls.append(len(inputs.num_drafts))
        raise KeyError("a bug in the verifier")

    with pytest.raises(KeyError):
        conformance.check_chain_verifier(broken, "lossless", **SMALL)
    assert len(calls) == 1  # the kit stopped at the first exception


def test_a_verifier_that_refuses_a_batch_reports_it():
    def refuses(inputs):  # a ValueError reports every request of the call, as a C++ exception does
        raise ValueError("bad batch")

    r = conformance.check_chain_verifier(refuses, "lossless", only=("exact_law",), **SMALL)
    assert not r.passed


TREE_SMALL = dict(law_requests=4000, batch_size=1000, alpha=1e-4)


@pytest.mark.parametrize("rule, sampling", [(specdec.Strict(), "independent"), (specdec.KSeq(), "independent"),
                                            (specdec.RecursiveRejection(), "without_replacement"),
                                            (specdec.TargetOnly(), "without_replacement")], ids=repr)
def test_specdec_tree_rules_pass_the_tree_kit(rule, sampling):
    r = conformance.check_tree_verifier(conformance.specdec_tree_verifier(rule), "lossless", sampling=sampling,
                                        name=repr(rule), reads_draft_probs=rule.reads_q, **TREE_SMALL)
    assert r.passed, r.text
    for check in ("exact_law/", "determinism", "batch_invariance", "bad_input/"):
        assert any(name.startswith(check) for name in r.checks), (check, list(r.checks))


def test_multi_step_sampling_on_siblings_drawn_without_replacement_is_caught():
    # SpecInfer's rule assumes i.i.d. siblings; the kit drawing them without replacement breaks its law,
    # most visibly on the tree with the widest root (40000 requests: the deviation is a few per cent)
    r = conformance.check_tree_verifier(conformance.specdec_tree_verifier(specdec.Strict()), "lossless",
                                        sampling="without_replacement", only=("exact_law/v3_tree_wide_root",),
                                        law_requests=40000, batch_size=4000, alpha=1e-4)
    assert r.checks and not any(r.checks.values()) and not r.passed, r.text


def test_tree_arguments_are_checked():
    with pytest.raises(ValueError, match="sampling"):
        conformance.check_tree_verifier(conformance.specdec_tree_verifier(specdec.Strict()), sampling="sequential")
    with pytest.raises(ValueError, match="guarantee"):
        conformance.check_tree_verifier(conformance.specdec_tree_verifier(specdec.Strict()), specdec.Lenient(0.5))


# ---- verifiers from logits ---------------------------------------------------------------------------

LOGIT_SMALL = dict(law_requests=4000, batch_size=1000, alpha=1e-4)


def test_specdec_from_logits_passes_the_logits_kit():
    r = conformance.check_chain_logits_verifier(conformance.specdec_logits_verifier(specdec.Strict()), "lossless",
                                                name="specdec strict from logits", **LOGIT_SMALL)
    assert r.passed, r.text
    for check in ("exact_law/", "determinism", "batch_invariance", "bad_input/"):
        assert any(name.startswith(check) for name in r.checks), (check, list(r.checks))
    assert sum(name.startswith("exact_law/") for name in r.checks) == 3


def test_a_draft_side_warped_with_the_targets_parameters_is_caught():
    """A common engine bug: q taken as the draft's logits warped with the target's parameters. The law
    is wrong where the two sides' parameters differ, and right where they agree."""

    def target_params_for_q(inputs):
        return specdec.verify_from_logits(specdec.Strict(), inputs.draft_tokens, inputs.target_rows,
                                          draft_logits=inputs.draft_rows, num_drafts=inputs.num_drafts,
                                          temperature=inputs.target_temperature, top_k=inputs.target_top_k,
                                          top_p=inputs.target_top_p, min_p=inputs.target_min_p,
                                          **conformance._streams(inputs))

    r = conformance.check_chain_logits_verifier(target_params_for_q, "lossless", only=("exact_law",), **LOGIT_SMALL)
    laws = {name.split("/", 1)[1]: ok for name, ok in r.checks.items()}
    assert not r.passed and len(laws) == 3, r.text
    assert not laws["v6_logits_topk_vs_topp"] and not laws["v5_logits_topp_vs_minp"], r.text
    assert laws["v8_logits_same_params"], r.text


def test_the_logits_inputs_carry_each_sides_warp():
    seen = []

    def record(inputs):
        seen.append(inputs)
        return conformance.specdec_logits_verifier(specdec.Greedy())(inputs)

    conformance.check_chain_logits_verifier(record, "greedy", only=("exact_law",), law_requests=200, batch_size=100)
    b = seen[0]
    assert isinstance(b, conformance.ChainLogitInputs)
    B = len(b.num_drafts)
    for side in ("target_", "draft_"):
        for field, dtype in (("temperature", np.float64), ("top_k", np.int32), ("top_p", np.float64),
                             ("min_p", np.float64)):
            a = getattr(b, side + field)
            assert a.shape == (B,) and a.dtype == dtype
    assert np.isneginf(np.concatenate([x.target_rows.ravel() for x in seen])).any()  # masked logits occur

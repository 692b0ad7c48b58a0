"""The emitted law through the Python API: chi-squared tests at fixed seeds (false-failure rate about
1e-4 each), and negative controls that must fail."""

import numpy as np
import pytest

import specdec
from conftest import chi2_critical, chi2_statistic, sample_from

P = np.array([0.05, 0.30, 0.10, 0.40, 0.15])  # target row at the drafted position
Q = np.array([0.40, 0.10, 0.30, 0.05, 0.15])  # draft row (far from P: total variation 0.6)
N = 20_000  # requests, one drafted token each


def first_tokens(rule, p=P, q=Q, n=N, seed=2024, backend=None):
    """The first emitted token of n requests, each drafting one token from q with numpy's generator
    and verified against p; the bonus row is uniform."""
    rng = np.random.default_rng(seed)
    V = len(p)
    drafts = sample_from(rng, np.tile(q, (n, 1)))[:, None]
    qs = np.tile(q, (n, 1, 1)).astype(np.float32)
    ps = np.tile(np.stack([p, np.full(V, 1.0 / V)]), (n, 1, 1)).astype(np.float32)
    r = specdec.verify(rule, drafts, qs, ps, seeds=seed, request_ids=np.arange(n), steps=0, backend=backend)
    assert specdec.is_valid(r.status).all()
    return r.tokens[:, 0]


def lenient_law(p, q, l):
    """Lenient(l)'s law of the first token for l < 1: min(q, p/l) + (1 - sum min(q, p/l)) norm(max(0, p - q))."""
    a = np.minimum(q, p / l)
    res = np.maximum(0.0, p - q)
    return a + (1.0 - a.sum()) * res / res.sum()


def passes(tokens, law):
    stat, dof = chi2_statistic(np.bincount(tokens, minlength=len(law)), law)
    return stat < chi2_critical(dof), stat


@pytest.mark.parametrize("rule", [specdec.Strict(), specdec.Block(), specdec.SampleAndMatch(), specdec.Lenient(1.7)],
                         ids=repr)
def test_lossless_rules_emit_the_target_law(rule, backend):
    ok, stat = passes(first_tokens(rule, backend=backend), P)
    assert ok, f"{rule!r}: chi-squared {stat:.1f} against p"


def test_negative_control_lenient_below_one_is_not_the_target_law(backend):
    tokens = first_tokens(specdec.Lenient(0.3), backend=backend)
    ok, stat = passes(tokens, P)
    assert not ok, f"the test could not tell Lenient(0.3) from p (chi-squared {stat:.1f})"
    # ... and its own closed form passes, so the failure is the law's, not the sampler's
    ok, stat = passes(tokens, lenient_law(P, Q, 0.3))
    assert ok, f"chi-squared {stat:.1f} against Lenient(0.3)'s closed form"


def test_negative_control_drafts_not_sampled_from_q_break_the_law():
    # Verifying against a q that the drafts were not drawn from (here: drafts from P, rows Q) is not
    # exact; the test must see it.
    rng = np.random.default_rng(77)
    drafts = sample_from(rng, np.tile(P, (N, 1)))[:, None]
    r = specdec.verify(specdec.Strict(), drafts, np.tile(Q, (N, 1, 1)), np.tile(np.stack([P, P]), (N, 1, 1)),
                       seeds=77, request_ids=np.arange(N), steps=0)
    ok, stat = passes(r.tokens[:, 0], P)
    assert not ok, f"chi-squared {stat:.1f}"


def test_two_positions_sequence_law_of_strict():
    # Two drafted positions with rows independent of the context: the first two emitted tokens (the
    # second from this round when the first was accepted, else from the next round's bonus position)
    # must be distributed as p0 x p1. The next round's token is drawn with step 1 on the same request.
    rng = np.random.default_rng(5)
    n, V = N, 4
    p0, p1 = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.4, 0.1, 0.1])
    q0, q1 = np.array([0.25] * 4), np.array([0.1, 0.1, 0.4, 0.4])
    drafts = np.stack([sample_from(rng, np.tile(q0, (n, 1))), sample_from(rng, np.tile(q1, (n, 1)))], axis=1)
    qs = np.tile(np.stack([q0, q1]), (n, 1, 1))
    ps = np.tile(np.stack([p0, p1, p0]), (n, 1, 1))
    r = specdec.verify(specdec.Strict(), drafts, qs, ps, seeds=9, request_ids=np.arange(n), steps=0)
    second = r.tokens[:, 1].copy()
    redo = np.flatnonzero(r.num_accepted == 0)  # the second token comes from a fresh round against p1
    s = specdec.sample(np.tile(p1, (len(redo), 1)), seeds=9, request_ids=redo, steps=1)
    second[redo] = s.tokens
    pairs = r.tokens[:, 0] * V + second
    ok, stat = passes(pairs, np.outer(p0, p1).ravel())
    assert ok, f"chi-squared {stat:.1f} against p0 x p1"

"""specdec.simulate's MTAD, token-tree, block-verification and SPRINTER token-process simulators
(python/src/simulate_methods.cpp): agreement with specdec.theory's closed forms (or, for MTAD, whose
theory has bounds only, with an exact enumeration written here), negative controls that must fail,
parity with the C++ simulators (tests/python/cpp_reference.cpp: the same streams, so the same
histograms and counts bit for bit, means and log-likelihood sums to rounding), chunking and grid
invariance, and the refusals.

Tolerance, as test_simulate.py: a simulated mean agrees with its exact value when
|z| = |mean - exact| / std_error < 5 (a false-failure rate of about 6e-7 per configuration under
the normal approximation); a law is a chi-squared test at a false-failure rate of about 1e-4
(conftest.chi2_critical). A negative control must give |z| > 5 (or a statistic above the critical
value) for every configuration it names."""

import itertools

import numpy as np
import pytest

import specdec
from specdec import simulate, theory
from conftest import chi2_critical, chi2_statistic, read, run_reference

Z = 5.0


# MTAD -------------------------------------------------------------------------------------------


def mtad_exact_tokens(p, q, tau, gamma, draft=None):
    """E[gamma_i] of MTAD with sampled drafting by enumeration of the V^gamma drafts (x_t i.i.d. from
    `draft`, q by default): gamma_i = 1 + the longest j with tau < min(1, p(x_{1:j}) / q(x_{1:j}))."""
    draft = q if draft is None else draft
    logp, logq = np.log(p), np.log(q)
    total = 0.0
    for xs in itertools.product(range(len(p)), repeat=gamma):
        log_ratio, accepted = 0.0, 0
        for j, x in enumerate(xs, 1):
            log_ratio += logp[x] - logq[x]
            if tau < min(1.0, np.exp(log_ratio)):
                accepted = j
        total += np.prod([draft[x] for x in xs]) * (accepted + 1)
    return round(total, 12)  # where every draft passes, 3 and not 3 - 4e-16 (the z-score of a constant is 0 or inf)


P3 = np.array([0.5, 0.3, 0.2])
Q3 = np.array([0.3, 0.3, 0.4])
TAUS = np.array([0.9, 0.6, 0.3, 0.1])
GAMMAS = np.array([1, 2, 4])


def test_mtad_sampled_matches_the_enumeration_and_the_guaranteed_tokens():
    r = simulate.mtad(P3, Q3, TAUS[:, None], GAMMAS, draws=30_000, seed=31)
    assert r.tokens.mean.shape == (4, 3) and r.tokens.histogram.shape[:2] == (4, 3)
    assert (r.tokens.histogram.sum(axis=-1) == 30_000).all()
    exact = np.array([[mtad_exact_tokens(P3, Q3, t, g) for g in GAMMAS] for t in TAUS])
    assert np.abs(r.tokens.z_score(exact)).max() < Z, r.tokens.z_score(exact)
    # every iteration emits at least theory's guaranteed tokens (Theorem 3.6's argument), U = max |log p - log q|
    u = np.abs(np.log(P3) - np.log(Q3)).max()
    guaranteed = theory.mtad.guaranteed_tokens_per_iteration(TAUS[:, None], u, GAMMAS)
    assert (r.min_tokens >= guaranteed).all()
    assert r.min_tokens.min() >= 1 and (r.tokens.draft_tokens == 30_000 * GAMMAS).all()
    np.testing.assert_array_equal(r.emitted_tokens, (r.tokens.histogram * np.arange(r.tokens.histogram.shape[-1]))
                                  .sum(axis=-1))
    # negative control: the same enumeration with drafts from p instead of q is rejected wherever it
    # differs (9 of the 12 configurations: not where tau is so small that every draft passes)
    wrong = np.array([[mtad_exact_tokens(P3, Q3, t, g, draft=P3) for g in GAMMAS] for t in TAUS])
    differs = wrong != exact
    assert differs.sum() == 9 and (np.abs(r.tokens.z_score(wrong))[differs] > Z).all(), r.tokens.z_score(wrong)


def test_mtad_argmax_emits_exactly_the_guaranteed_tokens():
    # q = reversed p: |log p - log q| = log 1.5 for both tokens, and argmax q = 1 with p/q = 2/3, so
    # prefix j passes iff j log 1.5 < -log tau: every iteration emits exactly 1 + min(gamma, j*)
    p, q, gamma = np.array([0.6, 0.4]), np.array([0.4, 0.6]), np.array([0, 1, 3, 5])
    r = simulate.mtad(p, q, TAUS[:, None], gamma, draws=2_000, seed=3, drafting="argmax")
    exact = theory.mtad.guaranteed_tokens_per_iteration(TAUS[:, None], np.log(1.5), gamma)
    assert (r.tokens.std_error == 0).all() and (r.min_tokens == exact).all()
    assert (r.tokens.z_score(exact) == 0).all()
    # negative control: the bound for U = 2 log 1.5 differs where j* > 0 and gamma > 0, and is rejected there
    wrong = theory.mtad.guaranteed_tokens_per_iteration(TAUS[:, None], 2 * np.log(1.5), gamma)
    differs = wrong != exact
    assert differs.sum() >= 4 and np.isinf(r.tokens.z_score(wrong)[differs]).all()


def test_mtad_log_likelihoods_without_drafts_are_the_target_samples():
    # gamma = 0: each iteration emits one token from p, so sum_log_p / draws estimates -H(p) and
    # sum_log_q / draws the cross term sum p log q, each with standard error sd(log(.)(X)) / sqrt(draws)
    n = 40_000
    r = simulate.mtad(P3, Q3, 0.5, 0, draws=n, seed=9)
    assert r.emitted_tokens == n and r.tokens.mean == 1.0
    for got, log in ((r.sum_log_p, np.log(P3)), (r.sum_log_q, np.log(Q3))):
        mean = P3 @ log
        se = np.sqrt((P3 @ log**2 - mean**2) / n)
        assert abs(got / n - mean) / se < Z
    np.testing.assert_allclose(r.perplexity_p, np.exp(-r.sum_log_p / n), rtol=1e-15)
    # negative control: sum_log_p is not the cross term (sum p log q)
    log = np.log(Q3)
    assert abs(r.sum_log_p / n - P3 @ log) / np.sqrt((P3 @ log**2 - (P3 @ log)**2) / n) > Z


# token trees ------------------------------------------------------------------------------------

TREES = {
    "chain": np.array([-1, 0, 1, 2, 3]),
    "bushy": np.array([-1, 0, 0, 0, 1, 1, 2, 4, 4]),
    "random": np.array([-1, 0, 0, 1, 2, 1, 3, 0, 6, 5, 2]),
}


def end_probabilities(parents, alphas):
    """P(the walk ends at node n): children tried in id order, the first accepted one descended into."""
    reach = np.zeros(len(parents))
    end = np.zeros(len(parents))
    reach[0] = 1.0
    for n in range(len(parents)):
        rejected = reach[n]
        for c in np.flatnonzero(parents == n):
            reach[c] = rejected * alphas[c]
            rejected *= 1.0 - alphas[c]
        end[n] = rejected
    return end


@pytest.mark.parametrize("name", TREES)
def test_tree_walk_matches_theory_and_its_end_law(name):
    parents = TREES[name]
    rng = np.random.default_rng(len(parents))
    alphas = rng.uniform(0.1, 0.95, (6, len(parents)))
    alphas[:, 0] = 7.0  # the root's alpha is ignored
    r = simulate.tree_walk(parents, alphas, draws=30_000, seed=17)
    assert r.accepted.mean.shape == (6,) and r.last_node.shape == (6, len(parents))
    assert (r.last_node.sum(axis=-1) == 30_000).all() and (r.accepted.draft_tokens == 30_000 * (len(parents) - 1)).all()
    alphas[:, 0] = 0.0
    exact = theory.tree.expected_accepted(parents, alphas)
    assert np.abs(r.accepted.z_score(exact)).max() < Z, r.accepted.z_score(exact)
    for i in range(6):
        stat, dof = chi2_statistic(r.last_node[i], end_probabilities(parents, alphas[i]))
        assert stat < chi2_critical(dof), (i, stat)
    assert (r.coins >= r.accepted.mean * 30_000 - 0.5).all()  # one coin at least per accepted draft
    # negative control: every alpha 10 % lower is rejected
    assert (np.abs(r.accepted.z_score(theory.tree.expected_accepted(parents, 0.9 * alphas))) > Z).all()


def test_tree_walk_negative_control_on_the_end_law():
    parents = TREES["bushy"]
    alphas = np.full(len(parents), 0.6)
    r = simulate.tree_walk(parents, alphas, draws=30_000, seed=5)
    stat, dof = chi2_statistic(r.last_node, end_probabilities(parents, np.full(len(parents), 0.5)))
    assert stat > chi2_critical(dof), stat


# block verification -----------------------------------------------------------------------------


def test_block_verification_matches_theory_over_a_grid():
    rng = np.random.default_rng(12)
    p, q = rng.dirichlet(np.ones(3), (5, 1)), rng.dirichlet(np.ones(3), (5, 1))
    g = np.array([1, 2, 3, 4])
    r = simulate.block_verification(p, q, g, draws=30_000, seed=41)
    assert r.block.mean.shape == (5, 4) and r.gain.mean.shape == (5, 4)
    block = theory.block.block_expected_accepted(p, q, g)
    token_wise = theory.block.token_wise_expected_accepted(p, q, g)
    assert np.abs(r.block.z_score(block)).max() < Z, r.block.z_score(block)
    assert np.abs(r.token_wise.z_score(token_wise)).max() < Z, r.token_wise.z_score(token_wise)
    assert np.abs(r.gain.z_score(block - token_wise)).max() < Z, r.gain.z_score(block - token_wise)
    np.testing.assert_allclose(r.gain.mean, r.block.mean - r.token_wise.mean, rtol=1e-9, atol=1e-12)
    assert (r.block.draft_tokens == 30_000 * g).all()


def test_block_verification_gain_on_the_papers_example_and_its_negative_control():
    # V = 2, p = (1/3, 2/3), q = (2/3, 1/3), gamma = 2: E[tau] = 11/9, E[A] = 10/9
    r = simulate.block_verification([1 / 3, 2 / 3], [2 / 3, 1 / 3], 2, draws=40_000, seed=6)
    assert abs(r.block.z_score(11 / 9)) < Z and abs(r.token_wise.z_score(10 / 9)) < Z
    assert abs(r.gain.z_score(1 / 9)) < Z
    # negative controls: no gain, and block verification's mean against token-wise's closed form
    assert abs(r.gain.z_score(0.0)) > Z and abs(r.block.z_score(10 / 9)) > Z
    # the paired difference has a smaller standard error than two independent means would
    assert r.gain.std_error < np.hypot(r.block.std_error, r.token_wise.std_error)


# SPRINTER's token process -----------------------------------------------------------------------

P5 = np.array([0.05, 0.30, 0.10, 0.40, 0.15])
Q5 = np.array([0.40, 0.10, 0.30, 0.05, 0.15])


def test_sprinter_token_process_law_and_rates_over_a_grid():
    eta_tp, eta_fp = np.array([[0.3], [0.9]]), np.array([0.0, 0.2, 0.6])
    n = 30_000
    r = simulate.sprinter_token_process(P5, Q5, eta_tp, eta_fp, draws=n, seed=13)
    assert r.token.shape == (2, 3, 5) and (r.token.sum(axis=-1) == n).all()
    tv = 0.5 * np.abs(P5 - Q5).sum()
    exact = theory.sprinter.acceptance_rate(eta_fp, tv)
    assert np.abs(r.acceptance.z_score(np.broadcast_to(exact, (2, 3)))).max() < Z
    np.testing.assert_array_equal(r.acceptance.mean, r.kept / n)
    q_acc = Q5[Q5 <= P5].sum()
    verifier = eta_tp * q_acc + eta_fp * (1 - q_acc)
    assert np.abs(r.verifier_acceptance.z_score(verifier)).max() < Z
    for i, j in itertools.product(range(2), range(3)):
        law = (1 - eta_fp[j]) * P5 + eta_fp[j] * Q5  # Theorem 3.1, whatever eta_tp
        stat, dof = chi2_statistic(r.token[i, j], law)
        assert stat < chi2_critical(dof), (i, j, stat)
    assert (r.fallbacks == 0).all()
    # negative controls: the acceptance rate of eta_fp + 0.1, and the token law against p where eta_fp = 0.6
    assert (np.abs(r.acceptance.z_score(theory.sprinter.acceptance_rate(eta_fp + 0.1, tv))) > Z).all()
    for i in range(2):
        stat, dof = chi2_statistic(r.token[i, 2], P5)
        assert stat > chi2_critical(dof), stat


# invariance, parity, refusals -------------------------------------------------------------------

PT = TREES["random"]
AT = np.linspace(0.2, 0.9, len(PT))

# each simulator on a grid of 3 configurations: (call(draws=, stream=, first=), the result's counts,
# which add up over chunks)
SIMULATORS = {
    "mtad": (lambda **k: simulate.mtad(P3, Q3, [0.2, 0.5, 0.8], 3, seed=2, **k),
             lambda r: (r.tokens.histogram, r.emitted_tokens, r.tokens.draft_tokens)),
    "tree_walk": (lambda **k: simulate.tree_walk(PT, AT * np.array([[1.0], [0.9], [0.8]]), seed=2, **k),
                  lambda r: (r.accepted.histogram, r.last_node, r.coins)),
    "block_verification": (lambda **k: simulate.block_verification(P3, Q3, [1, 2, 3], seed=2, **k),
                           lambda r: (r.block.histogram, r.token_wise.histogram)),
    "sprinter_token_process": (lambda **k: simulate.sprinter_token_process(P5, Q5, 0.8, [0.1, 0.3, 0.5], seed=2, **k),
                               lambda r: (r.token, r.kept, r.verifier_accepted, r.fallbacks)),
}


@pytest.mark.parametrize("name", SIMULATORS)
def test_a_configuration_is_the_same_in_any_grid_and_in_chunks(name):
    call, counts = SIMULATORS[name]
    streams = np.array([100, 101, 102])
    grid = counts(call(draws=3_000, stream=streams))
    other = counts(call(draws=3_000, stream=np.array([5, 101, 9])))  # configuration 1 on the same stream
    chunks = [counts(call(draws=d, stream=streams, first=f)) for f, d in ((0, 1_000), (1_000, 1_500), (2_500, 500))]
    default = counts(call(draws=3_000))  # the default streams: the flat indices 0, 1, 2
    for k, g in enumerate(grid):
        np.testing.assert_array_equal(other[k][1], g[1])
        np.testing.assert_array_equal(sum(c[k] for c in chunks), g)
    assert not np.array_equal(other[0][0], grid[0][0]) and not np.array_equal(default[0], grid[0])


def test_a_configuration_alone_equals_it_in_a_grid():
    grid = simulate.mtad(P3, Q3, [0.2, 0.5, 0.8], [[2], [3]], draws=2_000, seed=4, stream=np.arange(6).reshape(2, 3))
    alone = simulate.mtad(P3, Q3, 0.5, 3, draws=2_000, seed=4, stream=4)
    np.testing.assert_array_equal(alone.tokens.histogram, grid.tokens.histogram[1, 1])
    assert alone.sum_log_p == grid.sum_log_p[1, 1]
    walk = simulate.tree_walk(PT, np.stack([AT, AT * 0.5]), draws=2_000, seed=4, stream=[3, 8])
    np.testing.assert_array_equal(simulate.tree_walk(PT, AT * 0.5, draws=2_000, seed=4, stream=8).last_node,
                                  walk.last_node[1])


def test_simulators_equal_the_cpp_api(reference, tmp_path):
    rng = np.random.default_rng(8)
    n, V = 6, 4
    stream = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    p, q = rng.dirichlet(np.ones(V), n), rng.dirichlet(np.ones(V), n)
    tau, gamma = rng.uniform(0.05, 0.95, n), rng.integers(0, 6, n).astype(np.int32)
    block_gamma = gamma + 1
    eta_tp, eta_fp = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    alphas = rng.uniform(0, 1, (n, len(PT)))
    cases = [(tmp_path / "mtad", "simulate_mtad 0 91 7 2000", dict(p=p, q=q, tau=tau, gamma=gamma, stream=stream)),
             (tmp_path / "argmax", "simulate_mtad 1 92 0 500", dict(p=p, q=q, tau=tau, gamma=gamma, stream=stream)),
             (tmp_path / "tree", "simulate_tree 93 3 2000", dict(parents=PT.astype(np.int32), alphas=alphas,
                                                                 stream=stream)),
             (tmp_path / "block", "simulate_block 94 0 2000", dict(p=p, q=q, gamma=block_gamma, stream=stream)),
             (tmp_path / "sprinter", "simulate_sprinter_tokens 95 11 2000", dict(p=p, q=q, eta_tp=eta_tp,
                                                                                eta_fp=eta_fp, stream=stream))]
    run_reference(reference, cases)
    # histograms and counts bit for bit; means and log-likelihood sums to rounding (the extension is
    # built with -O3 -march=native, the reference with -O1: FMA contraction)
    for name, drafting, seed, first, draws in (("mtad", "sampled", 91, 7, 2000), ("argmax", "argmax", 92, 0, 500)):
        m = simulate.mtad(p, q, tau, gamma, draws=draws, seed=seed, stream=stream, first=first, drafting=drafting)
        want = read(tmp_path / name, "out_hist", np.uint64).reshape(n, -1)
        np.testing.assert_array_equal(m.tokens.histogram, want, err_msg=name)
        np.testing.assert_array_equal(m.emitted_tokens, read(tmp_path / name, "out_emitted", np.uint64))
        np.testing.assert_array_equal(m.min_tokens, read(tmp_path / name, "out_min", np.uint64))
        np.testing.assert_allclose(m.tokens.mean, read(tmp_path / name, "out_mean", np.float64), rtol=1e-14)
        np.testing.assert_allclose(m.sum_log_p, read(tmp_path / name, "out_sum_log_p", np.float64), rtol=1e-12)
        np.testing.assert_allclose(m.sum_log_q, read(tmp_path / name, "out_sum_log_q", np.float64), rtol=1e-12)
    t = simulate.tree_walk(PT, alphas, draws=2000, seed=93, stream=stream, first=3)
    np.testing.assert_array_equal(t.accepted.histogram, read(tmp_path / "tree", "out_hist", np.uint64).reshape(n, -1))
    np.testing.assert_array_equal(t.last_node, read(tmp_path / "tree", "out_last", np.uint64).reshape(n, -1))
    np.testing.assert_array_equal(t.coins, read(tmp_path / "tree", "out_coins", np.uint64))
    np.testing.assert_allclose(t.accepted.mean, read(tmp_path / "tree", "out_mean", np.float64), rtol=1e-14)
    b = simulate.block_verification(p, q, block_gamma, draws=2000, seed=94, stream=stream)
    np.testing.assert_array_equal(b.block.histogram, read(tmp_path / "block", "out_block", np.uint64).reshape(n, -1))
    np.testing.assert_array_equal(b.token_wise.histogram,
                                  read(tmp_path / "block", "out_token_wise", np.uint64).reshape(n, -1))
    np.testing.assert_allclose(b.gain.mean, read(tmp_path / "block", "out_gain", np.float64), rtol=1e-12, atol=1e-15)
    s = simulate.sprinter_token_process(p, q, eta_tp, eta_fp, draws=2000, seed=95, stream=stream, first=11)
    np.testing.assert_array_equal(s.token, read(tmp_path / "sprinter", "out_token", np.uint64).reshape(n, V))
    for name in ("kept", "verifier_accepted", "fallbacks"):
        np.testing.assert_array_equal(getattr(s, name), read(tmp_path / "sprinter", f"out_{name}", np.uint64))
    assert (s.verifier_accepted > 0).all() and (s.kept > s.verifier_accepted).any()


@pytest.mark.parametrize("call, error, match", [
    # shapes
    (lambda: simulate.mtad(P3, [0.5, 0.5], 0.5, 2, draws=10, seed=0), specdec.Error,
     "simulate.mtad: .*p and q must be probability rows of the same non-zero length"),
    (lambda: simulate.mtad(P3, Q3, [0.2, 0.5], [1, 2, 3], draws=10, seed=0), ValueError, "do not broadcast"),
    (lambda: simulate.block_verification(np.tile(P3, (2, 1)), np.tile(Q3, (3, 1)), 2, draws=10, seed=0), ValueError,
     "do not broadcast"),
    (lambda: simulate.sprinter_token_process(P5, Q5[:4], 0.5, 0.5, draws=10, seed=0), specdec.Error, "p and q"),
    (lambda: simulate.tree_walk(PT, AT[:-1], draws=10, seed=0), specdec.Error,
     "simulate.tree_walk: .*one alpha per node"),
    (lambda: simulate.tree_walk(PT, AT, draws=10, seed=0, stream=[1, 2]), ValueError, "stream"),
    # domains
    (lambda: simulate.tree_walk(PT, np.where(np.arange(len(PT)) == 3, 1.5, AT), draws=10, seed=0), specdec.Error,
     r"every alpha_n \(n >= 1\) must be in \[0, 1\]"),
    (lambda: simulate.tree_walk(PT, -AT, draws=10, seed=0), specdec.Error, "every alpha_n"),
    (lambda: simulate.mtad(P3, Q3, 1.5, 2, draws=10, seed=0), specdec.Error, "tau must be in"),
    (lambda: simulate.mtad(P3, Q3, 0.5, -1, draws=10, seed=0), specdec.Error, "gamma must be >= 0"),
    (lambda: simulate.mtad(P3 * 2, Q3, 0.5, 1, draws=10, seed=0), specdec.Error, "probability rows"),
    (lambda: simulate.mtad(P3, Q3, 0.5, 1, draws=10, seed=0, drafting="beam"), ValueError, "drafting"),
    (lambda: simulate.block_verification(P3, Q3, 0, draws=10, seed=0), specdec.Error, "gamma must be >= 1"),
    (lambda: simulate.block_verification(P3, Q3, -2, draws=10, seed=0), specdec.Error, "gamma must be >= 0"),
    (lambda: simulate.block_verification(P3, Q3, 1.5, draws=10, seed=0), TypeError, "gamma"),
    (lambda: simulate.sprinter_token_process(P5, Q5, 0.5, 1.2, draws=10, seed=0), specdec.Error, "eta_fp"),
    (lambda: simulate.sprinter_token_process(P5, Q5, -0.1, 0.5, draws=10, seed=0), specdec.Error, "eta_tp"),
    (lambda: simulate.sprinter_token_process(P5, Q5, 0.5, 0.5, draws=-1, seed=0), ValueError, "draws"),
    # bad parents
    (lambda: simulate.tree_walk([-1, 0, 2], [0, 0.5, 0.5], draws=10, seed=0), specdec.Error,
     "tree_layout: a node's parent is not an earlier node of its tree"),
    (lambda: simulate.tree_walk([0, 0, 1], [0, 0.5, 0.5], draws=10, seed=0), specdec.Error,
     r"tree_layout: a root \(node 0\) has a parent"),
    (lambda: simulate.tree_walk(np.zeros(0, np.int32), [0.0], draws=10, seed=0), specdec.Error,
     "tree_layout: a tree needs its root"),
    (lambda: simulate.tree_walk([[-1, 0]], [0, 0.5], draws=10, seed=0), ValueError, "parents: expected a 1-D array"),
    (lambda: simulate.tree_walk([-1.0, 0.0], [0, 0.5], draws=10, seed=0), TypeError, "parents: must be integers"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_bad_input_is_refused_with_the_message(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_specdec_errors_are_value_errors():
    with pytest.raises(ValueError):
        simulate.tree_walk([-1, 0, 2], [0, 0.5, 0.5], draws=10, seed=0)

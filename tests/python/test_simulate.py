"""specdec.simulate: parity with the C++ simulators (tests/python/cpp_reference.cpp, the same
streams, so the same histograms and counts bit for bit, means to rounding), agreement with specdec.theory's closed forms within a
stated tolerance, and negative controls that must fail.

Tolerance: a simulated mean agrees with its closed form when |z| = |mean - exact| / std_error < 5
(a false-failure rate of about 6e-7 per configuration under the normal approximation, so below
1e-4 for the grids here); the first-token law is a chi-squared test at a false-failure rate of
about 1e-4 (conftest.chi2_critical)."""

import numpy as np
import pytest

import specdec
from specdec import simulate, theory
from conftest import chi2_critical, chi2_statistic, read, run_reference

Z = 5.0
ALPHAS = np.linspace(0.05, 0.95, 10)
GAMMAS = np.array([1, 2, 4, 7])


def test_sd_chain_matches_the_closed_form_over_a_grid():
    r = simulate.sd_chain(ALPHAS[:, None], GAMMAS, draws=40_000, seed=11)
    assert r.mean.shape == (10, 4) and r.histogram.shape[:2] == (10, 4)
    assert (r.histogram.sum(axis=-1) == 40_000).all() and (r.overflow == 0).all()
    z = r.z_score(theory.sd.expected_tokens(ALPHAS[:, None], GAMMAS))
    assert np.abs(z).max() < Z, z
    # the variance too: Var(T) within 10 % (its relative standard error is about 1-3 % here)
    np.testing.assert_allclose(r.variance, theory.sd.tokens_variance(ALPHAS[:, None], GAMMAS), rtol=0.1)


def test_negative_control_a_shifted_alpha_is_rejected():
    r = simulate.sd_chain(ALPHAS[1:-1], 4, draws=40_000, seed=11)
    z = r.z_score(theory.sd.expected_tokens(ALPHAS[1:-1] + 0.03, 4))
    assert (np.abs(z) > Z).all(), z


def test_position_dependent_chain_and_sv_match_their_closed_forms():
    rng = np.random.default_rng(3)
    alphas = rng.uniform(0.2, 0.95, (6, 5))
    r = simulate.sd_chain(alphas, draws=40_000, seed=5)
    assert np.abs(r.z_score(theory.sd.expected_tokens(alphas))).max() < Z
    n = simulate.sv_accepted(alphas, draws=40_000, seed=5)
    np.testing.assert_allclose(n.mean, r.mean - 1.0, rtol=1e-12)  # the same draws: N = T - 1
    assert np.abs(n.z_score(theory.sv.expected_accepted(alphas, 5))).max() < Z


def test_sprinter_chain_matches_theorem_3_3():
    eta_fp = np.array([0.0, 0.1, 0.3, 0.5])
    r = simulate.sprinter_chain(0.9, eta_fp, np.array([[1], [5], [12]]), draws=40_000, seed=21)
    assert r.mean.shape == (3, 4)
    exact = theory.sprinter.expected_tokens(0.9, eta_fp, np.array([[1], [5], [12]]))
    assert np.abs(r.z_score(exact)).max() < Z
    assert np.abs(r.z_score(exact * 1.05)).min() > Z  # negative control: 5 % off is seen


def test_token_process_first_token_is_p_and_the_rate_is_one_minus_tv():
    p = np.array([0.05, 0.30, 0.10, 0.40, 0.15])
    q = np.array([0.40, 0.10, 0.30, 0.05, 0.15])
    t = simulate.sd_token_process(p, q, 3, draws=30_000, seed=8)
    stat, dof = chi2_statistic(t.first_token, p)
    assert stat < chi2_critical(dof), stat
    rate = theory.sd.acceptance_rate(p, q)
    se = np.sqrt(rate * (1 - rate) / 30_000)
    assert abs(t.first_accepted / 30_000 - rate) / se < Z
    assert abs(t.tokens.z_score(theory.sd.expected_tokens(rate, 3))) < Z
    # negative control: lenient 0.3 is not p (and its first tokens are seen to differ)
    lenient = simulate.sd_token_process(p, q, 3, draws=30_000, seed=8, lenience=0.3)
    stat, dof = chi2_statistic(lenient.first_token, p)
    assert stat > chi2_critical(dof), stat


def test_a_configuration_is_the_same_alone_in_chunks_or_in_a_grid():
    grid = simulate.sd_chain(ALPHAS, 4, draws=5_000, seed=2, stream=np.arange(10) + 100)
    alone = simulate.sd_chain(ALPHAS[3], 4, draws=5_000, seed=2, stream=103)
    np.testing.assert_array_equal(alone.histogram, grid.histogram[3])
    a = simulate.sd_chain(ALPHAS[3], 4, draws=2_000, seed=2, stream=103)
    b = simulate.sd_chain(ALPHAS[3], 4, draws=3_000, seed=2, stream=103, first=2_000)
    np.testing.assert_array_equal(a.histogram + b.histogram, grid.histogram[3])
    other = simulate.sd_chain(ALPHAS[3], 4, draws=5_000, seed=3, stream=103)
    assert not np.array_equal(other.histogram, alone.histogram)


def test_bad_parameters_are_errors_naming_them():
    with pytest.raises(specdec.Error, match="alpha"):
        simulate.sd_chain(1.5, 3, draws=10, seed=0)
    with pytest.raises(TypeError, match="gamma"):
        simulate.sd_chain(0.5, 2.5, draws=10, seed=0)
    with pytest.raises(ValueError, match="seed"):
        simulate.sd_chain(0.5, 2, draws=10, seed=-1)
    with pytest.raises(ValueError, match="stream"):
        simulate.sd_chain([0.5, 0.6], 2, draws=10, seed=0, stream=[1, 2, 3])
    with pytest.raises(ValueError, match="stream"):
        simulate.sd_chain([0.5, 0.6], 2, draws=10, seed=0, stream=[1.0, 2.0])
    with pytest.raises(specdec.Error, match="eta_fp"):
        simulate.sprinter_chain(0.9, 1.0, 3, draws=10, seed=0)
    with pytest.raises(ValueError, match="p and q"):
        simulate.sd_token_process([0.5, 0.5], [1.0], 2, draws=10, seed=0)
    with pytest.raises(specdec.Error):
        simulate.sd_token_process([0.5, 0.6], [0.5, 0.5], 2, draws=10, seed=0)


def test_simulators_equal_the_cpp_api(reference, tmp_path):
    rng = np.random.default_rng(4)
    n = 12
    alpha, gamma = rng.uniform(0, 1, n), rng.integers(0, 8, n).astype(np.int32)
    stream = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    eta_tp, eta_fp, r = rng.uniform(0, 1, n), rng.uniform(0, 0.9, n), rng.integers(0, 10, n).astype(np.int32)
    p, q = rng.dirichlet(np.ones(7)), rng.dirichlet(np.ones(7))
    cases = [(tmp_path / "chain", "simulate_chain 77 5 3000", dict(alpha=alpha, gamma=gamma, stream=stream)),
             (tmp_path / "sprinter", "simulate_sprinter 78 0 3000", dict(eta_tp=eta_tp, eta_fp=eta_fp, r=r,
                                                                         stream=stream)),
             (tmp_path / "tokens", "simulate_tokens 1 3 9 79 0 4000", dict(p=p, q=q)),
             (tmp_path / "lenient", "simulate_tokens 0.5 3 9 79 0 4000", dict(p=p, q=q))]
    run_reference(reference, cases)
    c = simulate.sd_chain(alpha, gamma, draws=3000, seed=77, stream=stream, first=5)
    want = read(tmp_path / "chain", "out_hist", np.uint64).reshape(n, -1)
    np.testing.assert_array_equal(c.histogram[:, :want.shape[1]], want)
    assert (c.histogram[:, want.shape[1]:] == 0).all()
    # E[T] = E[A] + 1 is added in Python, C++ adds it with its affine map: equal to rounding (and see below)
    np.testing.assert_allclose(c.mean, read(tmp_path / "chain", "out_mean", np.float64), rtol=1e-14)
    np.testing.assert_array_equal(c.draft_tokens, read(tmp_path / "chain", "out_drafts", np.uint64))
    s = simulate.sprinter_chain(eta_tp, eta_fp, r, draws=3000, seed=78, stream=stream)
    # means to rounding (the extension is built with -O3 -march=native, the reference with -O1: FMA
    # contraction in the Welford update); the draft counts, sum of N + 1 over the runs, exactly
    np.testing.assert_allclose(s.mean, read(tmp_path / "sprinter", "out_mean", np.float64), rtol=1e-14)
    np.testing.assert_array_equal(s.draft_tokens, read(tmp_path / "sprinter", "out_drafts", np.uint64))
    for name, lenience in (("tokens", 1.0), ("lenient", 0.5)):
        t = simulate.sd_token_process(p, q, 3, draws=4000, seed=79, stream=9, lenience=lenience)
        np.testing.assert_array_equal(t.first_token, read(tmp_path / name, "out_first", np.uint64))
        np.testing.assert_array_equal(t.tokens.histogram[:4], read(tmp_path / name, "out_hist", np.uint64))
        assert t.first_accepted == int(read(tmp_path / name, "out_first_accepted", np.uint64)[0])

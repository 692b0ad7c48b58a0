"""specdec.theory: the closed forms over arrays. Parity with the C++ functions themselves (compiled
by tests/python/cpp_reference.cpp on the same parameter sets), values known in closed form
(Leviathan's limits, the block-verification paper's example, identities between the modules),
broadcasting, and the refusals."""

import numpy as np
import pytest

import specdec
from specdec.theory import block, mtad, sd, sprinter, sv, tree
from conftest import random_rows, read, run_reference


def test_theory_equals_the_cpp_functions(reference, tmp_path):
    rng = np.random.default_rng(40)
    n, K, V = 200, 5, 4
    alpha = rng.random(n)
    alpha[:4] = [0.0, 1.0, 1 - 1e-12, 0.5]
    params = dict(alpha=alpha, c=rng.uniform(0, 1, n), eta_tp=rng.random(n), eta_fp=rng.uniform(0, 0.99, n),
                  tau=rng.random(n), u=rng.uniform(0, 2, n), alphas=rng.random((n, K)),
                  p=random_rows(rng, (n, V), np.float64), q=random_rows(rng, (n, V), np.float64),
                  gamma=rng.integers(0, 12, n).astype(np.int32), r=rng.integers(0, 9, n).astype(np.int32),
                  small_gamma=rng.integers(1, 4, n).astype(np.int32))
    d = tmp_path / "theory"
    run_reference(reference, [(d, f"theory {K} {V}", params)])
    P = params
    arity, k = 1 + P["r"] % 4, 1 + P["r"] % 4
    ours = {
        "sd.expected_tokens": sd.expected_tokens(P["alpha"], P["gamma"]),
        "sd.expected_tokens_rows": sd.expected_tokens(P["alphas"]),
        "sd.tokens_variance": sd.tokens_variance(P["alpha"], P["gamma"]),
        "sd.speedup": sd.speedup(P["alpha"], P["gamma"], P["c"]),
        "sd.optimal_gamma": sd.optimal_gamma(P["alpha"], P["c"], 64),
        "sd.acceptance_rate": sd.acceptance_rate(P["p"], P["q"]),
        "sprinter.expected_tokens": sprinter.expected_tokens(P["eta_tp"], P["eta_fp"], P["r"]),
        "sprinter.tokens_variance": sprinter.tokens_variance(P["eta_tp"], P["eta_fp"], P["r"]),
        "sprinter.prob_tokens": sprinter.prob_tokens(P["gamma"], P["eta_tp"], P["eta_fp"], P["r"]),
        "sv.expected_accepted": sv.expected_accepted(P["alphas"]),
        "sv.variance_accepted": sv.variance_accepted(P["alphas"]),
        "mtad.lemma_a1_bound": mtad.lemma_a1_bound(P["tau"], 1 + P["c"]),
        "mtad.theorem_3_6_bound": mtad.theorem_3_6_bound(P["tau"], P["u"]),
        "tree.complete_tree_expected_accepted": tree.complete_tree_expected_accepted(P["alpha"], arity, P["gamma"]),
        "tree.mss_acceptance": tree.mss_acceptance(P["p"], P["q"], k),
        "tree.kseq_acceptance": tree.kseq_acceptance(P["p"], P["q"], k),
        "block.block_expected_accepted": block.block_expected_accepted(P["p"], P["q"], P["small_gamma"]),
    }
    for name, got in ours.items():
        want = read(d, name, np.int32 if name == "sd.optimal_gamma" else np.float64)
        assert got.shape == (n,), name
        # the same C++ code: equal up to the compilers' flags (the extension is built -O3, the reference -O1)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, err_msg=name)


def test_known_values():
    # Leviathan eq. (1): its limits and a hand value
    assert sd.expected_tokens(1.0, 7) == 8.0 and sd.expected_tokens(0.0, 7) == 1.0
    assert sd.expected_tokens(0.5, 2) == pytest.approx(1.75, rel=1e-15)
    assert sd.expected_tokens([0.5, 0.5]) == pytest.approx(1.75, rel=1e-15)  # positional form, same alphas
    assert sd.speedup(0.5, 0, 0.3) == 1.0
    assert sd.optimal_gamma([0.1, 0.3], 0.3).tolist() == [0, 0]  # alpha <= c: do not speculate
    # the block-verification paper's example: V = 2, p = (1/3, 2/3), q = (2/3, 1/3), gamma = 2
    p, q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
    assert block.token_wise_expected_accepted(p, q, 2) == pytest.approx(10 / 9, rel=1e-12)
    assert block.block_expected_accepted(p, q, 2) == pytest.approx(11 / 9, rel=1e-12)
    # SPRINTER eq. (3), (eta_tp - eta_tp^r) / (1 - eta_tp) + eta_tp^r / (1 - eta_fp), and its limit eta_tp = 1
    assert sprinter.expected_tokens(1.0, 0.2, 3) == pytest.approx(3 + 0.2 / 0.8, rel=1e-14)
    for eta_tp, eta_fp, r in ((0.7, 0.0, 5), (0.9, 0.3, 4), (0.5, 0.6, 0)):
        eq3 = (eta_tp - eta_tp**r) / (1 - eta_tp) + eta_tp**r / (1 - eta_fp)
        assert sprinter.expected_tokens(eta_tp, eta_fp, r) == pytest.approx(eq3, rel=1e-13)
    assert sprinter.acceptance_rate(0.0, 0.3) == pytest.approx(0.7, rel=1e-15)  # Leviathan's beta = 1 - TV
    # MTAD: tau = 1 gives 1; the energy model is a sum of products
    assert mtad.lemma_a1_bound(1.0, 3.0) == 1.0
    assert mtad.energy(2.0, 3.0, 5.0, 7.0) == 41.0
    assert mtad.perplexity([0.5, 0.5]) == pytest.approx(2.0, rel=1e-15)


def test_identities_between_the_modules():
    rng = np.random.default_rng(1)
    a = rng.random((50, 6))
    np.testing.assert_allclose(sv.expected_accepted(a), sd.expected_tokens(a) - 1, rtol=1e-14)
    np.testing.assert_allclose(tree.chain_expected_accepted(a), sv.expected_accepted(a), rtol=1e-14)
    chain = np.arange(-1, 6)  # root and 6 chained drafts
    np.testing.assert_allclose(tree.expected_accepted(chain, np.concatenate([np.zeros((50, 1)), a], axis=1)),
                               tree.chain_expected_accepted(a), rtol=1e-14)
    alpha, depth = rng.random(50), rng.integers(0, 9, 50)
    np.testing.assert_allclose(tree.complete_tree_expected_accepted(alpha, 1, depth),
                               sd.expected_tokens(alpha, depth) - 1, rtol=1e-13, atol=1e-15)
    p, q = random_rows(rng, (20, 5), np.float64), random_rows(rng, (20, 5), np.float64)
    for k_one in (tree.mss_acceptance, tree.kseq_acceptance, tree.rrs_acceptance):  # one candidate: the chain's rule
        np.testing.assert_allclose(k_one(p, q, 1), sd.acceptance_rate(p, q), rtol=1e-12)
    # the variance of a capped geometric law against its definition
    g, al = 4, 0.6
    ks = np.arange(0, g + 3)
    law = sd.prob_tokens(ks, al, g)
    assert law.sum() == pytest.approx(1.0, rel=1e-14)
    mean = (ks * law).sum()
    assert sd.tokens_variance(al, g) == pytest.approx(((ks - mean) ** 2 * law).sum(), rel=1e-12)


def test_broadcasting_and_result_types():
    out = sd.expected_tokens(np.linspace(0, 1, 5)[:, None], np.arange(4)[None, :])
    assert out.shape == (5, 4) and out.dtype == np.float64
    assert out[:, 0].tolist() == [1.0] * 5  # gamma = 0: one token
    rows = sd.speedup(np.full((3, 2, 4), 0.5), None, np.array([0.0, 0.1]))  # alphas on the last axis
    assert rows.shape == (3, 2)
    assert isinstance(sd.expected_tokens(0.5, 3), float)
    g = sd.optimal_gamma(np.array([0.5, 0.9]), 0.05)
    assert g.dtype.kind == "i" and isinstance(sd.optimal_gamma(0.9, 0.05), int)
    assert sv.expected_accepted(np.ones((2, 3))).tolist() == [3.0, 3.0]  # gamma defaults to the row length


def test_bad_parameters_are_errors_naming_function_and_argument():
    with pytest.raises(specdec.Error, match=r"sd\.expected_tokens.*alpha"):
        sd.expected_tokens([0.5, 1.5], 2)
    with pytest.raises(specdec.Error, match=r"sd\.expected_tokens.*gamma"):
        sd.expected_tokens(0.5, -1)
    with pytest.raises(TypeError, match="gamma"):
        sd.expected_tokens(0.5, 2.5)
    with pytest.raises(TypeError, match="alpha"):
        sd.expected_tokens("0.5", 2)
    with pytest.raises(ValueError, match="broadcast"):
        sd.expected_tokens(np.zeros(3), np.zeros(4, int))
    with pytest.raises(ValueError, match="alphas"):
        sd.expected_tokens(0.5)  # the positional form needs a row
    with pytest.raises(specdec.Error, match=r"sd\.acceptance_rate"):
        sd.acceptance_rate([0.5, 0.5], [0.5, 0.6])  # q is not a probability row
    with pytest.raises(specdec.Error, match="tree.expected_accepted"):
        tree.expected_accepted([-1, 2, 0], [0, 0.5, 0.5])  # node 1's parent is not an earlier node
    with pytest.raises(ValueError, match="alphas"):
        tree.expected_accepted([-1, 0], [0.5, 0.5, 0.5])

"""Speculative Verification (Kim et al.; include/specdec/theory/sv.hpp): ``a`` holds a[0..] on its
last axis, a[i] the acceptance of draft i + 1 given drafts 1..i accepted. N counts accepted drafts
only (N = T - 1 of theory.sd). ``gamma`` defaults to the length of the last axis."""

import numpy as np

from ._vectorize import vmap


def _gamma(a, gamma):
    return np.shape(a)[-1] if gamma is None and np.ndim(a) else gamma


def prob_accepted(n, a, gamma=None):
    """P_gamma(N = n) (appendix D, eq. (3))."""
    return vmap("sv_prob_accepted", "sv.prob_accepted", n=("i", n), a=("r", a), gamma=("i", _gamma(a, gamma)))


def expected_accepted(a, gamma=None):
    """E(N | gamma) = sum_{k=1}^{gamma} prod_{i<k} a[i] (appendix D, eq. (4))."""
    return vmap("sv_expected_accepted", "sv.expected_accepted", a=("r", a), gamma=("i", _gamma(a, gamma)))


def variance_accepted(a, gamma=None):
    """Var(N | gamma) for the law of eq. (3)."""
    return vmap("sv_variance_accepted", "sv.variance_accepted", a=("r", a), gamma=("i", _gamma(a, gamma)))


def goodput(expected_tokens, latency):
    """Tokens per unit time, expected_tokens / latency (Definition D.5, eq. (5))."""
    return vmap("sv_goodput", "sv.goodput", expected_tokens=("f", expected_tokens), latency=("f", latency))

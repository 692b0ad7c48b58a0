"""Speculative Verification (Kim et al.; include/specdec/theory/sv.hpp): ``a`` holds a[0..] on its
last axis, a[i] the acceptance of draft i + 1 given drafts 1..i accepted. N counts accepted drafts
only (N = T - 1 of theory.sd). ``gamma`` defaults to the length of the last axis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from ._vectorize import vmap

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def _gamma(a, gamma):
    return np.shape(a)[-1] if gamma is None and np.ndim(a) else gamma


def prob_accepted(n: ArrayLike, a: ArrayLike, gamma: Optional[ArrayLike] = None) -> Union[float, np.ndarray]:
    """P_gamma(N = n) (appendix D, eq. (3))."""
    return vmap("sv_prob_accepted", "sv.prob_accepted", n=("i", n), a=("r", a), gamma=("i", _gamma(a, gamma)))


def expected_accepted(a: ArrayLike, gamma: Optional[ArrayLike] = None) -> Union[float, np.ndarray]:
    """E(N | gamma) = sum_{k=1}^{gamma} prod_{i<k} a[i] (appendix D, eq. (4))."""
    return vmap("sv_expected_accepted", "sv.expected_accepted", a=("r", a), gamma=("i", _gamma(a, gamma)))


def variance_accepted(a: ArrayLike, gamma: Optional[ArrayLike] = None) -> Union[float, np.ndarray]:
    """Var(N | gamma) for the law of eq. (3)."""
    return vmap("sv_variance_accepted", "sv.variance_accepted", a=("r", a), gamma=("i", _gamma(a, gamma)))


def goodput(expected_tokens: ArrayLike, latency: ArrayLike) -> Union[float, np.ndarray]:
    """Tokens per unit time, expected_tokens / latency (Definition D.5, eq. (5))."""
    return vmap("sv_goodput", "sv.goodput", expected_tokens=("f", expected_tokens), latency=("f", latency))

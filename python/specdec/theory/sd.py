"""Standard speculative decoding (Leviathan, Kalman and Matias 2023) and its generalisations
(include/specdec/theory/sd.hpp). T = 1 + A tokens per iteration: the bonus/correction token is
counted. Position-dependent forms take ``alphas`` with alpha_1..alpha_gamma on the last axis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from ._vectorize import vmap

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def prob_tokens(k: ArrayLike, alpha: ArrayLike, gamma: ArrayLike) -> Union[float, np.ndarray]:
    """P(T = k) with i.i.d. acceptance alpha: alpha^(k-1) (1 - alpha) for k <= gamma, alpha^gamma at
    k = gamma + 1."""
    return vmap("sd_prob_tokens", "sd.prob_tokens", k=("i", k), alpha=("f", alpha), gamma=("i", gamma))


def expected_tokens(alpha: ArrayLike, gamma: Optional[ArrayLike] = None) -> Union[float, np.ndarray]:
    """E[T] = (1 - alpha^(gamma+1)) / (1 - alpha) (eq. (1)); with ``gamma=None``, ``alpha`` holds
    alpha_1..alpha_gamma on its last axis and E[T] = 1 + sum_k prod_{i<=k} alpha_i."""
    if gamma is None:
        return vmap("sd_expected_tokens_rows", "sd.expected_tokens", alphas=("r", alpha))
    return vmap("sd_expected_tokens", "sd.expected_tokens", alpha=("f", alpha), gamma=("i", gamma))


def tokens_variance(alpha: ArrayLike, gamma: Optional[ArrayLike] = None) -> Union[float, np.ndarray]:
    """Var(T), i.i.d. (alpha, gamma) or position-dependent (``gamma=None``: alphas on the last axis)."""
    if gamma is None:
        return vmap("sd_tokens_variance_rows", "sd.tokens_variance", alphas=("r", alpha))
    return vmap("sd_tokens_variance", "sd.tokens_variance", alpha=("f", alpha), gamma=("i", gamma))


def speedup(alpha: ArrayLike, gamma: Optional[ArrayLike], c: ArrayLike) -> Union[float, np.ndarray]:
    """Walltime improvement (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)) (Theorem 3.8) with cost
    ratio c; ``gamma=None``: alphas on the last axis of ``alpha``."""
    if gamma is None:
        return vmap("sd_speedup_rows", "sd.speedup", alphas=("r", alpha), c=("f", c))
    return vmap("sd_speedup", "sd.speedup", alpha=("f", alpha), gamma=("i", gamma), c=("f", c))


def operations_factor(alpha: ArrayLike, gamma: Optional[ArrayLike], c_hat: ArrayLike) -> Union[float, np.ndarray]:
    """The factor of arithmetic operations (Theorem 3.11) with the draft's relative cost c_hat;
    ``gamma=None``: alphas on the last axis of ``alpha``."""
    if gamma is None:
        return vmap("sd_operations_factor_rows", "sd.operations_factor", alphas=("r", alpha), c_hat=("f", c_hat))
    return vmap("sd_operations_factor", "sd.operations_factor", alpha=("f", alpha), gamma=("i", gamma),
                c_hat=("f", c_hat))


def optimal_gamma(alpha: ArrayLike, c: ArrayLike, max_gamma: ArrayLike = 128) -> Union[int, np.ndarray]:
    """The gamma in [0, max_gamma] that maximises ``speedup(alpha, gamma, c)`` (an int array)."""
    return vmap("sd_optimal_gamma", "sd.optimal_gamma", alpha=("f", alpha), c=("f", c), max_gamma=("i", max_gamma))


def acceptance_rate(p: ArrayLike, q: ArrayLike) -> Union[float, np.ndarray]:
    """beta = sum_x min(p(x), q(x)) = 1 - TV(p, q) of rows p and q (last axis)."""
    return vmap("sd_acceptance_rate", "sd.acceptance_rate", p=("r", p), q=("r", q))

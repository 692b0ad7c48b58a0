"""SPRINTER, sequential approximate verification (Zhong, Teku and Tandon;
include/specdec/theory/sprinter.hpp): a verifier accepts acceptable drafts with rate eta_tp and
unacceptable ones with rate eta_fp; the first r drafts are acceptable. N counts the drafts the
verifier accepted before its first rejection."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

from ._vectorize import vmap

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def total_variation(eta_fp: ArrayLike, tv_pq: ArrayLike) -> Union[float, np.ndarray]:
    """d_TV(p, p_SPRINTER) = eta_fp d_TV(p, q) (Theorem 3.1)."""
    return vmap("sprinter_total_variation", "sprinter.total_variation", eta_fp=("f", eta_fp), tv_pq=("f", tv_pq))


def acceptance_rate(eta_fp: ArrayLike, tv_pq: ArrayLike) -> Union[float, np.ndarray]:
    """beta_SPRINTER = 1 - (1 - eta_fp) d_TV(p, q) (Theorem A.4)."""
    return vmap("sprinter_acceptance_rate", "sprinter.acceptance_rate", eta_fp=("f", eta_fp), tv_pq=("f", tv_pq))


def prob_tokens(i: ArrayLike, eta_tp: ArrayLike, eta_fp: ArrayLike, r: ArrayLike) -> Union[float, np.ndarray]:
    """P(N = i) (Theorem 3.3)."""
    return vmap("sprinter_prob_tokens", "sprinter.prob_tokens", i=("i", i), eta_tp=("f", eta_tp),
                eta_fp=("f", eta_fp), r=("i", r))


def expected_tokens(eta_tp: ArrayLike, eta_fp: ArrayLike, r: ArrayLike) -> Union[float, np.ndarray]:
    """E[N] = (eta_tp - eta_tp^r) / (1 - eta_tp) + eta_tp^r / (1 - eta_fp) (Theorem 3.3, eq. (3))."""
    return vmap("sprinter_expected_tokens", "sprinter.expected_tokens", eta_tp=("f", eta_tp), eta_fp=("f", eta_fp),
                r=("i", r))


def tokens_variance(eta_tp: ArrayLike, eta_fp: ArrayLike, r: ArrayLike) -> Union[float, np.ndarray]:
    """Var(N) for the law of Theorem 3.3."""
    return vmap("sprinter_tokens_variance", "sprinter.tokens_variance", eta_tp=("f", eta_tp), eta_fp=("f", eta_fp),
                r=("i", r))


def expected_stopping_time(eta_tp: ArrayLike, eta_fp: ArrayLike, r: ArrayLike,
                           t_d: ArrayLike) -> Union[float, np.ndarray]:
    """E[T_stop] = t_d (E[N] + 1) (Theorem 3.4): draft time up to the verifier's first rejection."""
    return vmap("sprinter_expected_stopping_time", "sprinter.expected_stopping_time", eta_tp=("f", eta_tp),
                eta_fp=("f", eta_fp), r=("i", r), t_d=("f", t_d))


def flops_sd(gamma: ArrayLike, f_d: ArrayLike, f_t: ArrayLike) -> Union[float, np.ndarray]:
    """SD-Flops(gamma) = gamma f_d + gamma f_t (eq. (5)): one run of standard SD."""
    return vmap("sprinter_flops_sd", "sprinter.flops_sd", gamma=("i", gamma), f_d=("f", f_d), f_t=("f", f_t))


def flops_sprinter(gamma: ArrayLike, f_d: ArrayLike, f_v: ArrayLike, f_t: ArrayLike) -> Union[float, np.ndarray]:
    """SPRINTER-Flops(gamma) = gamma f_d + gamma f_v + f_t (eq. (6)): the target charged once."""
    return vmap("sprinter_flops_sprinter", "sprinter.flops_sprinter", gamma=("i", gamma), f_d=("f", f_d),
                f_v=("f", f_v), f_t=("f", f_t))


def flops_sprinter_catch_up(gamma: ArrayLike, f_d: ArrayLike, f_v: ArrayLike,
                            f_t: ArrayLike) -> Union[float, np.ndarray]:
    """gamma f_d + gamma f_v + gamma f_t: SPRINTER with a KV-cached target's catch-up of the gamma positions."""
    return vmap("sprinter_flops_sprinter_catch_up", "sprinter.flops_sprinter_catch_up", gamma=("i", gamma),
                f_d=("f", f_d), f_v=("f", f_v), f_t=("f", f_t))

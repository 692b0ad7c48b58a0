"""Multi-token assisted decoding, MTAD (include/specdec/theory/mtad.hpp): perplexities in the
natural-log convention, the bounds of Lemma A.1, Lemma 3.4, Theorems 3.2, 3.5 and 3.6, and the
energy model of eq. (9). gamma_bar (>= 1) counts the target's token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

from ._vectorize import vmap

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def perplexity(probs: ArrayLike) -> Union[float, np.ndarray]:
    """exp(-mean log p) of the token probabilities on the last axis (eq. (1))."""
    return vmap("mtad_perplexity", "mtad.perplexity", probs=("r", probs))


def perplexity_from_log_probs(log_probs: ArrayLike) -> Union[float, np.ndarray]:
    """exp(-mean) of the natural-log probabilities on the last axis."""
    return vmap("mtad_perplexity_from_log_probs", "mtad.perplexity_from_log_probs", log_probs=("r", log_probs))


def theorem_3_2_perplexity(expected_log_likelihood: ArrayLike, gamma_bar: ArrayLike) -> Union[float, np.ndarray]:
    """exp(-E L_p / gamma_bar), the limit of MTJD's perplexity (Theorem 3.2, eq. (3))."""
    return vmap("mtad_theorem_3_2_perplexity", "mtad.theorem_3_2_perplexity",
                expected_log_likelihood=("f", expected_log_likelihood), gamma_bar=("f", gamma_bar))


def lemma_a1_bound(tau: ArrayLike, gamma_bar: ArrayLike) -> Union[float, np.ndarray]:
    """tau^(-1/gamma_bar), the bound on lim PPL_p / PPL_q (Lemma A.1)."""
    return vmap("mtad_lemma_a1_bound", "mtad.lemma_a1_bound", tau=("f", tau), gamma_bar=("f", gamma_bar))


def lemma_3_4_bound(gamma_bar: ArrayLike, epsilon: ArrayLike, expected_max_log_q: ArrayLike,
                    cross_entropy: ArrayLike) -> Union[float, np.ndarray]:
    """The bound of Lemma 3.4 (eq. (6)) on MTAD's perplexity under the draft."""
    return vmap("mtad_lemma_3_4_bound", "mtad.lemma_3_4_bound", gamma_bar=("f", gamma_bar), epsilon=("f", epsilon),
                expected_max_log_q=("f", expected_max_log_q), cross_entropy=("f", cross_entropy))


def theorem_3_5_bound(tau: ArrayLike, gamma_bar: ArrayLike, epsilon: ArrayLike, entropy_p: ArrayLike,
                      u: ArrayLike) -> Union[float, np.ndarray]:
    """The bound of Theorem 3.5 on MTAD's perplexity under the target."""
    return vmap("mtad_theorem_3_5_bound", "mtad.theorem_3_5_bound", tau=("f", tau), gamma_bar=("f", gamma_bar),
                epsilon=("f", epsilon), entropy_p=("f", entropy_p), u=("f", u))


def theorem_3_6_bound(tau: ArrayLike, u: ArrayLike) -> Union[float, np.ndarray]:
    """The bound of Theorem 3.6 on the tokens per iteration (ignores the draft length)."""
    return vmap("mtad_theorem_3_6_bound", "mtad.theorem_3_6_bound", tau=("f", tau), u=("f", u))


def guaranteed_tokens_per_iteration(tau: ArrayLike, u: ArrayLike, gamma: ArrayLike) -> Union[int, np.ndarray]:
    """1 + min(gamma, j*): the tokens every iteration emits at least, Theorem 3.6's argument for a
    draft of length gamma (an int array)."""
    return vmap("mtad_guaranteed_tokens_per_iteration", "mtad.guaranteed_tokens_per_iteration", tau=("f", tau),
                u=("f", u), gamma=("i", gamma))


def energy(pw_flop: ArrayLike, t_flop: ArrayLike, pw_mem: ArrayLike, t_mem: ArrayLike) -> Union[float, np.ndarray]:
    """pw_flop t_flop + pw_mem t_mem, the energy model of eq. (9)."""
    return vmap("mtad_energy", "mtad.energy", pw_flop=("f", pw_flop), t_flop=("f", t_flop), pw_mem=("f", pw_mem),
                t_mem=("f", t_mem))

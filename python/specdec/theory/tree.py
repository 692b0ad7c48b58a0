"""Token trees (include/specdec/theory/tree.hpp): expected accepted drafts A of a tree walk (the
bonus token not counted), the slot model of complete trees, and the per-node acceptance of the
multi-candidate rules (SpecInfer's MSS, recursive rejection, SpecTr's K-SEQ)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

from ._vectorize import _array, vmap
from .. import _core
from .._core import Error

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def expected_accepted(parents: ArrayLike, alphas: ArrayLike) -> Union[float, np.ndarray]:
    """E[A] = sum_{n >= 1} P(reach n) of one tree given by ``parents`` (node 0 the root, parent -1;
    every other parent an earlier node) with alphas[..., n] = P(node n accepted | its parent reached
    and its earlier siblings rejected) on the last axis (alphas[..., 0] is ignored)."""
    par = _array("tree.expected_accepted", "parents", parents)
    if par.ndim != 1 or par.dtype.kind == "f":
        raise TypeError("tree.expected_accepted: parents: must be a 1-D array of integers")
    a = _array("tree.expected_accepted", "alphas", alphas)
    if a.ndim == 0 or a.shape[-1] != par.shape[0]:
        raise ValueError(f"tree.expected_accepted: alphas: expected a last axis of {par.shape[0]} (one per node), "
                         f"got shape {a.shape}")
    flat = np.ascontiguousarray(a, np.float64).reshape(-1, par.shape[0])
    try:
        out = _core.theory_tree_expected_accepted(np.ascontiguousarray(par, np.int32), flat)
    except Error as e:
        raise Error(f"tree.expected_accepted: {e}") from None
    out = out.reshape(a.shape[:-1])
    return out.item() if out.ndim == 0 else out


def chain_expected_accepted(alphas: ArrayLike) -> Union[float, np.ndarray]:
    """E[A] of a chain: sum_k prod_{i<=k} alpha_i (alphas on the last axis)."""
    return vmap("tree_chain_expected_accepted", "tree.chain_expected_accepted", alphas=("r", alphas))


def any_accepted(slot_alphas: ArrayLike) -> Union[float, np.ndarray]:
    """1 - prod_j (1 - alpha_j): some candidate of a node is accepted (slots on the last axis)."""
    return vmap("tree_any_accepted", "tree.any_accepted", slot_alphas=("r", slot_alphas))


def complete_tree_expected_accepted(alpha: ArrayLike, arity: ArrayLike, depth: ArrayLike) -> Union[float, np.ndarray]:
    """E[A] of the complete tree of ``arity`` and ``depth`` whose every child is accepted with alpha:
    s = 1 - (1 - alpha)^arity, E[A] = sum_{i=1}^{depth} s^i."""
    return vmap("tree_complete_tree_expected_accepted", "tree.complete_tree_expected_accepted", alpha=("f", alpha),
                arity=("i", arity), depth=("i", depth))


def complete_tree_expected_accepted_slots(slot_alphas: ArrayLike, depth: ArrayLike) -> Union[float, np.ndarray]:
    """E[A] of a complete tree of ``depth`` whose j-th children are accepted with slot_alphas[..., j]."""
    return vmap("tree_complete_tree_expected_accepted_slots", "tree.complete_tree_expected_accepted_slots",
                slot_alphas=("r", slot_alphas), depth=("i", depth))


def mss_acceptance(p: ArrayLike, q: ArrayLike, k: ArrayLike) -> Union[float, np.ndarray]:
    """P(a node emits one of its k i.i.d. candidates from q) under SpecInfer's multi-step sampling."""
    return vmap("tree_mss_acceptance", "tree.mss_acceptance", p=("r", p), q=("r", q), k=("i", k))


def rrs_acceptance(p: ArrayLike, q: ArrayLike, k: ArrayLike) -> Union[float, np.ndarray]:
    """The same for recursive rejection sampling of k candidates drawn without replacement (exact
    enumeration: small vocabularies)."""
    return vmap("tree_rrs_acceptance", "tree.rrs_acceptance", p=("r", p), q=("r", q), k=("i", k))


def kseq_acceptance(p: ArrayLike, q: ArrayLike, k: ArrayLike) -> Union[float, np.ndarray]:
    """The same for SpecTr's K-SEQ at its optimal rho: 1 - (1 - beta(rho*))^k."""
    return vmap("tree_kseq_acceptance", "tree.kseq_acceptance", p=("r", p), q=("r", q), k=("i", k))

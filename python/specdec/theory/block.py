"""Block verification (Sun et al., ICLR 2025; include/specdec/theory/block.hpp) against token-wise
verification, for a context-independent pair (the same rows p and q at every position), by exact
enumeration of the V^gamma blocks (small V and gamma)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

from ._vectorize import vmap

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def block_expected_accepted(p: ArrayLike, q: ArrayLike, gamma: ArrayLike) -> Union[float, np.ndarray]:
    """E[tau], the expected accepted drafts of block verification of gamma drafts."""
    return vmap("block_block_expected_accepted", "block.block_expected_accepted", p=("r", p), q=("r", q),
                gamma=("i", gamma))


def token_wise_expected_accepted(p: ArrayLike, q: ArrayLike, gamma: ArrayLike) -> Union[float, np.ndarray]:
    """E[A] = sum_{i=1}^{gamma} alpha^i of token-wise verification, alpha = sum min(p, q)."""
    return vmap("block_token_wise_expected_accepted", "block.token_wise_expected_accepted", p=("r", p), q=("r", q),
                gamma=("i", gamma))

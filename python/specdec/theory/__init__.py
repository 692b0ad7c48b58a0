"""specdec.theory: the library's closed forms (include/specdec/theory/, docs/theory.md), mapped over
numpy arrays of parameters.

Every function takes scalars or arrays and broadcasts them as numpy does; a "row" parameter (the
alphas of a chain, rows p and q) has its entries on the LAST axis and broadcasts on the others.
The result has the broadcast shape (a float or int for scalar inputs). Each entry is the C++
function's value on the matching entries, so a failed precondition (alpha outside [0, 1], gamma < 0,
a row that is not a probability row) raises ``specdec.Error`` (a ValueError) naming the function and
the parameter; a non-numeric or non-integer argument where an integer is needed raises TypeError.

    from specdec.theory import sd, sprinter
    sd.expected_tokens(np.linspace(0, 1, 11), 4)          # Leviathan eq. (1) for 11 alphas
    sprinter.expected_tokens(0.9, [0.0, 0.1, 0.2], 5)      # Theorem 3.3 over eta_fp

Submodules: ``sd`` (Leviathan et al.), ``sprinter`` (SPRINTER), ``sv`` (Speculative Verification),
``mtad`` (MTAD), ``tree`` (token trees and multi-candidate rules), ``block`` (block verification).
"""

from . import block, mtad, sd, sprinter, sv, tree

__all__ = ["sd", "sprinter", "sv", "mtad", "tree", "block"]

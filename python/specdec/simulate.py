"""specdec.simulate: the Monte-Carlo simulators of include/specdec/simulate/ (exec::seq) over numpy
arrays of parameters, seeded explicitly.

Each configuration (one entry of the broadcast parameters) runs ``draws`` simulated iterations on
the Philox streams (``seed``, ``stream``): draw i of a configuration reads the stream at address
(seed, stream, i >> 32, i & 0xFFFFFFFF, Purpose.SIMULATE) (include/specdec/simulate/options.hpp). So a
configuration's result does not depend on what else is simulated in the call, equals the C++
simulator's with ``run_options{seed, stream, first, draws}``, and a run split into chunks
(``first``) merges into the same histogram. ``stream`` defaults to each configuration's flat index
(distinct configurations, independent draws); pass it to compare configurations on common random
numbers or to reproduce one configuration of a grid alone.

    from specdec import simulate
    r = simulate.sd_chain(np.linspace(0.1, 0.9, 9), 4, draws=100_000, seed=1)
    r.mean, r.std_error            # E[T] (T = 1 + accepted drafts) per alpha, and its standard error
    r.z_score(specdec.theory.sd.expected_tokens(np.linspace(0.1, 0.9, 9), 4))

Results are ``Tally`` named tuples of arrays of the broadcast shape: ``mean``, ``variance`` and
``std_error`` of the simulated quantity, ``histogram`` (shape + (H,), counts of the tallied count
0, 1, ..., H - 1), ``draft_tokens`` and ``overflow`` (draws too large for the histogram, 2^20 and up).
``mtad``, ``tree_walk``, ``block_verification`` and ``sprinter_token_process`` return named tuples
of such Tallies, ``Estimate``s (a mean without a histogram) and count arrays (see each result type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional

import numpy as np

from . import _core
from ._core import Error
from .theory._vectorize import _array, _integers, broadcast

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["Tally", "Estimate", "TokenProcess", "MTADRun", "TreeWalk", "BlockVerification", "SprinterTokenProcess",
           "sd_chain", "sv_accepted", "sprinter_chain", "sd_token_process", "mtad", "tree_walk", "block_verification",
           "sprinter_token_process"]


class Tally(NamedTuple):
    """Monte-Carlo results per configuration (arrays of the broadcast shape; ``histogram`` has one
    more axis). ``mean`` estimates the expectation of the simulated quantity (named by the function)."""

    mean: np.ndarray
    variance: np.ndarray
    std_error: np.ndarray
    histogram: np.ndarray
    draft_tokens: np.ndarray
    overflow: np.ndarray

    def z_score(self, expected: ArrayLike) -> np.ndarray:
        """(mean - expected) / std_error (inf where the standard error is 0 and they differ, 0 where equal)."""
        return _z_score(self.mean, self.std_error, expected)


def _z_score(mean, std_error, expected):
    d = mean - np.asarray(expected, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = d / std_error
    return np.where(std_error > 0, z, np.where(d == 0, 0.0, np.copysign(np.inf, d)))


class Estimate(NamedTuple):
    """A simulated mean without a histogram (arrays of the broadcast shape): ``mean``, the
    ``variance`` of one draw and the mean's ``std_error``."""

    mean: np.ndarray
    variance: np.ndarray
    std_error: np.ndarray

    def z_score(self, expected: ArrayLike) -> np.ndarray:
        """(mean - expected) / std_error, as ``Tally.z_score``."""
        return _z_score(self.mean, self.std_error, expected)


class TokenProcess(NamedTuple):
    """``sd_token_process``'s result: ``tokens`` the Tally of T = 1 + accepted drafts per iteration;
    ``first_token`` [V] counts of the token emitted at the first position; ``bonus_token`` [V] counts
    of the bonus tokens; ``first_accepted`` iterations whose first draft was accepted (over
    ``draws``: the acceptance rate); ``fallbacks`` corrections whose residual had no mass."""

    tokens: Tally
    first_token: np.ndarray
    bonus_token: np.ndarray
    first_accepted: int
    fallbacks: int


class MTADRun(NamedTuple):
    """``mtad``'s result (arrays of the broadcast shape): ``tokens`` the Tally of gamma_i = accepted
    drafts + 1 per iteration (``histogram`` counts gamma_i itself; ``draft_tokens`` gamma per
    iteration); ``emitted_tokens`` the sum of gamma_i; ``min_tokens`` the smallest gamma_i (0 without
    draws); ``sum_log_p``, ``sum_log_q`` the natural-log likelihoods of every emitted token under p and
    q; ``perplexity_p``, ``perplexity_q`` = exp(-sum_log / emitted_tokens) (NaN without draws)."""

    tokens: Tally
    emitted_tokens: np.ndarray
    min_tokens: np.ndarray
    sum_log_p: np.ndarray
    sum_log_q: np.ndarray
    perplexity_p: np.ndarray
    perplexity_q: np.ndarray


class TreeWalk(NamedTuple):
    """``tree_walk``'s result: ``accepted`` the Tally of A, the accepted drafts (the depth of the last
    reached node) per walk (``draft_tokens``: the tree's N - 1 drafts per walk); ``last_node``
    [..., N] counts of the node each walk ended at (0: every child of the root failed); ``coins`` the
    acceptance tests drawn in all."""

    accepted: Tally
    last_node: np.ndarray
    coins: np.ndarray


class BlockVerification(NamedTuple):
    """``block_verification``'s result: ``block`` the Tally of tau, the drafts block verification
    accepted per block; ``token_wise`` the Tally of A, those token-wise verification (the strict rule)
    accepted of the same block (``draft_tokens``: gamma per block in both); ``gain`` the Estimate of
    tau - A per block (a paired difference: its standard error is that of the pairs)."""

    block: Tally
    token_wise: Tally
    gain: Estimate


class SprinterTokenProcess(NamedTuple):
    """``sprinter_token_process``'s result: ``token`` [..., V] counts of the emitted token; ``kept``
    draws whose draft token was kept (by the verifier or the target); ``verifier_accepted`` draws whose
    draft token the verifier accepted; ``fallbacks`` corrections whose residual had no mass;
    ``acceptance`` the Estimate of P(kept), beta_SPRINTER; ``verifier_acceptance`` that of
    P(verifier accepts)."""

    token: np.ndarray
    kept: np.ndarray
    verifier_accepted: np.ndarray
    fallbacks: np.ndarray
    acceptance: Estimate
    verifier_acceptance: Estimate


def _u64(name, x, where):
    v = int(x)
    if v != x or not 0 <= v < 2**64:
        raise ValueError(f"{where}: {name}: must be an integer in [0, 2**64), got {x!r}")
    return v


def _streams(where, stream, shape, n):
    if stream is None:
        return np.arange(n, dtype=np.uint32)
    s = _array(where, "stream", stream)
    if s.dtype.kind not in "iu" or (s.size and (s.min() < 0 or s.max() >= 2**32)):
        raise ValueError(f"{where}: stream: must be integers in [0, 2**32)")
    try:
        return np.ascontiguousarray(np.broadcast_to(s, shape), np.uint32).reshape(-1)
    except ValueError:
        raise ValueError(f"{where}: stream: shape {s.shape} does not broadcast to {shape}") from None


def _call(function, where, draws, seed, first, stream, leading=(), **params):
    """Broadcasts ``params`` (("f" | "i" | "r", value) as theory's vmap) and runs
    _core.simulate_<function>(*leading, *params, stream, seed, first, draws): returns the broadcast
    shape and the extension's dict of flat arrays."""
    draws, seed, first = _u64("draws", draws, where), _u64("seed", seed, where), _u64("first", first, where)
    shape, flat = broadcast(where, params)
    st = _streams(where, stream, shape, int(np.prod(shape, dtype=np.int64)))
    try:
        return shape, getattr(_core, "simulate_" + function)(*leading, *flat, st, seed, first, draws)
    except Error as e:
        raise Error(f"{where}: {e}") from None


def _tally(d, shape, shift=0.0):
    """The Tally of the extension's packed tallies ``d`` in the broadcast ``shape``; ``shift`` is added
    to the means (1 for T = 1 + A)."""
    return Tally(d["mean"].reshape(shape) + shift, d["variance"].reshape(shape), d["std_error"].reshape(shape),
                 d["histogram"].reshape(shape + d["histogram"].shape[-1:]), d["draft_tokens"].reshape(shape),
                 d["overflow"].reshape(shape))


def _estimate(d, name, shape):
    return Estimate(d[name + "_mean"].reshape(shape), d[name + "_variance"].reshape(shape),
                    d[name + "_std_error"].reshape(shape))


def _run(function, where, draws, seed, first, stream, shift, **params):
    """_call, then the one Tally it returns."""
    shape, d = _call(function, where, draws, seed, first, stream, **params)
    return _tally(d, shape, shift)


def sd_chain(alpha: ArrayLike, gamma: Optional[ArrayLike] = None, *, draws: int, seed: int,
             stream: Optional[ArrayLike] = None, first: int = 0) -> Tally:
    """Standard SD iterations with i.i.d. acceptance ``alpha`` and ``gamma`` drafts (C++
    ``simulate::sd::chain``); ``gamma=None``: ``alpha`` holds alpha_1..alpha_gamma on its last axis
    (position-dependent acceptance). ``mean`` estimates E[T], T = 1 + accepted drafts (the closed
    form: ``theory.sd.expected_tokens`` with the same arguments); ``histogram`` counts the accepted drafts."""
    if gamma is None:
        return _run("sd_chain_rows", "simulate.sd_chain", draws, seed, first, stream, 1.0, alphas=("r", alpha))
    return _run("sd_chain", "simulate.sd_chain", draws, seed, first, stream, 1.0, alpha=("f", alpha),
                gamma=("i", gamma))


def sv_accepted(a: ArrayLike, *, draws: int, seed: int, stream: Optional[ArrayLike] = None, first: int = 0) -> Tally:
    """Speculative Verification's N (appendix D, eq. (3)) for the acceptances ``a`` on the last axis
    (gamma = its length): the accepted prefix, the target's token not counted (C++
    ``simulate::sv::accepted``, the position-dependent chain). ``mean`` estimates E[N]
    (``theory.sv.expected_accepted``)."""
    return _run("sd_chain_rows", "simulate.sv_accepted", draws, seed, first, stream, 0.0, alphas=("r", a))


def sprinter_chain(eta_tp: ArrayLike, eta_fp: ArrayLike, r: ArrayLike, *, draws: int, seed: int,
                   stream: Optional[ArrayLike] = None, first: int = 0) -> Tally:
    """SPRINTER's drafting runs under the i.i.d. verifier of Theorem 3.3 (C++
    ``simulate::sprinter::verifier_chain``): ``mean`` estimates E[N], the tokens the verifier accepts
    before its first rejection (``theory.sprinter.expected_tokens``)."""
    return _run("sprinter_chain", "simulate.sprinter_chain", draws, seed, first, stream, 0.0, eta_tp=("f", eta_tp),
                eta_fp=("f", eta_fp), r=("i", r))


def sd_token_process(p: ArrayLike, q: ArrayLike, gamma: int, *, draws: int, seed: int, stream: int = 0, first: int = 0,
                     lenience: float = 1.0) -> TokenProcess:
    """SD iterations on actual tokens (C++ ``simulate::sd::token_process``): each draft x ~ q, tested
    against p by the strict rule (``lenience=1``) or ``Lenient(lenience)``, corrected from the residual
    on rejection; the bonus from p after gamma acceptances. One configuration: p, q rows [V]. The
    first token's law is p for the strict rule; the acceptance rate 1 - TV(p, q)
    (``theory.sd.acceptance_rate``)."""
    where = "simulate.sd_token_process"
    p = np.ascontiguousarray(_array(where, "p", p), np.float64)
    q = np.ascontiguousarray(_array(where, "q", q), np.float64)
    if p.ndim != 1 or q.shape != p.shape:
        raise ValueError(f"{where}: p and q: expected two rows of one length V, got {p.shape} and {q.shape}")
    g = int(_integers(where, "gamma", _array(where, "gamma", gamma)))
    lenience = float(lenience)
    if not (np.isfinite(lenience) and lenience > 0):
        raise ValueError(f"{where}: lenience: must be finite and > 0, got {lenience!r}")
    st = _u64("stream", stream, where)
    if st >= 2**32:
        raise ValueError(f"{where}: stream: must lie in [0, 2**32)")
    try:
        d = _core.simulate_sd_token_process(lenience, p, q, g, st, _u64("seed", seed, where),
                                            _u64("first", first, where), _u64("draws", draws, where))
    except Error as e:
        raise Error(f"{where}: {e}") from None
    t = Tally(d["mean"][0] + 1.0, d["variance"][0], d["std_error"][0], d["histogram"][0], d["draft_tokens"][0],
              d["overflow"][0])
    return TokenProcess(t, d["first_token"], d["bonus_token"], int(d["first_accepted"]), int(d["fallbacks"]))


def mtad(p: ArrayLike, q: ArrayLike, tau: ArrayLike, gamma: ArrayLike, *, draws: int, seed: int,
         stream: Optional[ArrayLike] = None, first: int = 0, drafting: str = "sampled") -> MTADRun:
    """MTAD's verification (C++ ``simulate::mtad::run``) on the context-free pair of rows ``p``, ``q``
    (last axis V): each iteration drafts ``gamma`` tokens (``drafting="sampled"``: i.i.d. from q;
    ``"argmax"``: argmax q repeated, the exact beam of a context-free q), accepts the longest prefix
    x_{1:j} with tau < min(1, p(x_{1:j}) / q(x_{1:j})), then samples one token from p. ``tokens.mean``
    estimates gamma_bar = E[gamma_i], gamma_i = j + 1; every gamma_i is at least
    ``theory.mtad.guaranteed_tokens_per_iteration(tau, max |log p - log q|, gamma)``."""
    where = "simulate.mtad"
    if drafting not in ("sampled", "argmax"):
        raise ValueError(f"{where}: drafting: must be 'sampled' or 'argmax', got {drafting!r}")
    shape, d = _call("mtad", where, draws, seed, first, stream, (drafting == "argmax",), p=("r", p), q=("r", q),
                     tau=("f", tau), gamma=("i", gamma))
    return MTADRun(_tally(d, shape), *(d[k].reshape(shape) for k in ("emitted_tokens", "min_tokens", "sum_log_p",
                                                                     "sum_log_q", "perplexity_p", "perplexity_q")))


def tree_walk(parents: ArrayLike, alphas: ArrayLike, *, draws: int, seed: int, stream: Optional[ArrayLike] = None,
              first: int = 0) -> TreeWalk:
    """Token-tree verification under per-node acceptance (C++ ``simulate::tree::walk``) of one tree
    given by ``parents`` (node 0 the root, parent -1; every other parent an earlier node), with
    alphas[..., n] = P(node n accepted | its parent reached and its earlier siblings rejected) on the
    last axis (alphas[..., 0] is ignored). ``accepted.mean`` estimates E[A], the accepted drafts
    (``theory.tree.expected_accepted(parents, alphas)``)."""
    where = "simulate.tree_walk"
    par = _array(where, "parents", parents)
    if par.dtype.kind == "f":
        raise TypeError(f"{where}: parents: must be integers, got dtype {par.dtype}")
    par = _integers(where, "parents", par)
    if par.ndim != 1:
        raise ValueError(f"{where}: parents: expected a 1-D array (one tree), got shape {par.shape}")
    par = np.ascontiguousarray(par, np.int32)
    shape, d = _call("tree_walk", where, draws, seed, first, stream, (par,), alphas=("r", alphas))
    return TreeWalk(_tally(d, shape), d["last_node"].reshape(shape + d["last_node"].shape[-1:]),
                    d["coins"].reshape(shape))


def block_verification(p: ArrayLike, q: ArrayLike, gamma: ArrayLike, *, draws: int, seed: int,
                       stream: Optional[ArrayLike] = None, first: int = 0) -> BlockVerification:
    """Block verification (Sun et al.) of gamma-token blocks drafted from the context-free row ``q``
    against ``p`` (C++ ``simulate::block::verification``), and token-wise verification of the same
    blocks. ``block.mean`` estimates E[tau] (``theory.block.block_expected_accepted``),
    ``token_wise.mean`` E[A] (``theory.block.token_wise_expected_accepted``), ``gain.mean`` their
    difference. gamma >= 1."""
    where = "simulate.block_verification"
    shape, d = _call("block_verification", where, draws, seed, first, stream, p=("r", p), q=("r", q),
                     gamma=("i", gamma))
    return BlockVerification(_tally(d["block"], shape), _tally(d["token_wise"], shape), _estimate(d, "gain", shape))


def sprinter_token_process(p: ArrayLike, q: ArrayLike, eta_tp: ArrayLike, eta_fp: ArrayLike, *, draws: int, seed: int,
                           stream: Optional[ArrayLike] = None, first: int = 0) -> SprinterTokenProcess:
    """One SPRINTER position per draw on actual tokens (C++ ``simulate::sprinter::token_process``):
    x ~ q; x is acceptable iff q(x) <= p(x); the verifier keeps it with eta_tp (acceptable) or eta_fp
    (not); a verifier-rejected x goes to the target, which keeps it by the strict rule or samples the
    residual. The emitted token's law is (1 - eta_fp) p + eta_fp q (Theorem 3.1); ``acceptance.mean``
    estimates beta_SPRINTER = 1 - (1 - eta_fp) TV(p, q) (``theory.sprinter.acceptance_rate``)."""
    where = "simulate.sprinter_token_process"
    shape, d = _call("sprinter_token_process", where, draws, seed, first, stream, p=("r", p), q=("r", q),
                     eta_tp=("f", eta_tp), eta_fp=("f", eta_fp))
    return SprinterTokenProcess(d["token"].reshape(shape + d["token"].shape[-1:]), d["kept"].reshape(shape),
                                d["verifier_accepted"].reshape(shape), d["fallbacks"].reshape(shape),
                                _estimate(d, "acceptance", shape), _estimate(d, "verifier_acceptance", shape))

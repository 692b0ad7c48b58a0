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
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _core
from ._core import Error
from .theory._vectorize import _array, _integers, broadcast

__all__ = ["Tally", "TokenProcess", "sd_chain", "sv_accepted", "sprinter_chain", "sd_token_process"]


class Tally(NamedTuple):
    """Monte-Carlo results per configuration (arrays of the broadcast shape; ``histogram`` has one
    more axis). ``mean`` estimates the expectation of the simulated quantity (named by the function)."""

    mean: np.ndarray
    variance: np.ndarray
    std_error: np.ndarray
    histogram: np.ndarray
    draft_tokens: np.ndarray
    overflow: np.ndarray

    def z_score(self, expected):
        """(mean - expected) / std_error (inf where the standard error is 0 and they differ, 0 where equal)."""
        d = self.mean - np.asarray(expected, np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = d / self.std_error
        return np.where(self.std_error > 0, z, np.where(d == 0, 0.0, np.copysign(np.inf, d)))


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


def _u64(name, x, where):
    v = int(x)
    if v != x or not 0 <= v < 2**64:
        raise ValueError(f"{where}: {name}: must be an integer in [0, 2**64), got {x!r}")
    return v


def _run(function, where, draws, seed, first, stream, shift, **params):
    """Broadcasts ``params`` (("f" | "i" | "r", value) as theory's vmap), runs _core.simulate_<function>
    and reshapes; ``shift`` is added to the means (1 for T = 1 + A)."""
    draws, seed, first = _u64("draws", draws, where), _u64("seed", seed, where), _u64("first", first, where)
    shape, flat = broadcast(where, params)
    n = int(np.prod(shape, dtype=np.int64))
    if stream is None:
        st = np.arange(n, dtype=np.uint32)
    else:
        s = _array(where, "stream", stream)
        if s.dtype.kind not in "iu" or (s.size and (s.min() < 0 or s.max() >= 2**32)):
            raise ValueError(f"{where}: stream: must be integers in [0, 2**32)")
        try:
            st = np.ascontiguousarray(np.broadcast_to(s, shape), np.uint32).reshape(-1)
        except ValueError:
            raise ValueError(f"{where}: stream: shape {s.shape} does not broadcast to {shape}") from None
    try:
        d = getattr(_core, "simulate_" + function)(*flat, st, seed, first, draws)
    except Error as e:
        raise Error(f"{where}: {e}") from None
    return Tally(d["mean"].reshape(shape) + shift, d["variance"].reshape(shape), d["std_error"].reshape(shape),
                 d["histogram"].reshape(shape + d["histogram"].shape[-1:]), d["draft_tokens"].reshape(shape),
                 d["overflow"].reshape(shape))


def sd_chain(alpha, gamma=None, *, draws, seed, stream=None, first=0):
    """Standard SD iterations with i.i.d. acceptance ``alpha`` and ``gamma`` drafts (C++
    ``simulate::sd::chain``); ``gamma=None``: ``alpha`` holds alpha_1..alpha_gamma on its last axis
    (position-dependent acceptance). ``mean`` estimates E[T], T = 1 + accepted drafts (the closed
    form: ``theory.sd.expected_tokens`` with the same arguments); ``histogram`` counts the accepted drafts."""
    if gamma is None:
        return _run("sd_chain_rows", "simulate.sd_chain", draws, seed, first, stream, 1.0, alphas=("r", alpha))
    return _run("sd_chain", "simulate.sd_chain", draws, seed, first, stream, 1.0, alpha=("f", alpha),
                gamma=("i", gamma))


def sv_accepted(a, *, draws, seed, stream=None, first=0):
    """Speculative Verification's N (appendix D, eq. (3)) for the acceptances ``a`` on the last axis
    (gamma = its length): the accepted prefix, the target's token not counted (C++
    ``simulate::sv::accepted``, the position-dependent chain). ``mean`` estimates E[N]
    (``theory.sv.expected_accepted``)."""
    return _run("sd_chain_rows", "simulate.sv_accepted", draws, seed, first, stream, 0.0, alphas=("r", a))


def sprinter_chain(eta_tp, eta_fp, r, *, draws, seed, stream=None, first=0):
    """SPRINTER's drafting runs under the i.i.d. verifier of Theorem 3.3 (C++
    ``simulate::sprinter::verifier_chain``): ``mean`` estimates E[N], the tokens the verifier accepts
    before its first rejection (``theory.sprinter.expected_tokens``)."""
    return _run("sprinter_chain", "simulate.sprinter_chain", draws, seed, first, stream, 0.0, eta_tp=("f", eta_tp),
                eta_fp=("f", eta_fp), r=("i", r))


def sd_token_process(p, q, gamma, *, draws, seed, stream=0, first=0, lenience=1.0):
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

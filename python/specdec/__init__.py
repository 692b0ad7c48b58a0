"""specdec: speculative-decoding verification and sampling with addressed randomness.

Python bindings of the specdec C++ headers (docs/python.md). Every call takes its randomness as
explicit per-request arrays (``seeds``, ``request_ids``, ``steps``): a request's tokens depend on
its own seed, id, step and rows, never on the other requests of the batch, the backend or a global
generator. Row arrays (probabilities, logits) must be float32 or float64, C-contiguous and in CPU
memory; they are read in place, never copied or converted (a TypeError names the argument).
Results are new numpy arrays, or torch tensors sharing those arrays' memory when the call's rows
(``target_probs``, ``target_logits``, ``probs``, ``logits``) are torch tensors.
"""

from __future__ import annotations

import enum
import functools
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Optional, Union

import numpy as np

from . import _core
from ._core import Error  # specdec::error (shape or parameter misuse); a subclass of ValueError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "Error", "Status", "RowStatus", "Purpose", "is_valid",
    "Strict", "Lenient", "Greedy", "SampleAndMatch", "Block", "Typical",
    "RecursiveRejection", "KSeq", "TargetOnly",
    "VerifyResult", "TreeResult", "SampleResult",
    "verify", "verify_from_logits", "verify_tree", "verify_tree_from_logits", "sample", "sample_logits", "softmax", "warp_logits",
    "uniform", "philox4x32_10", "Decoder", "StepEvent",
    "BACKENDS", "DEFAULT_BACKEND", "HAS_SIMD",
]

__version__: str = _core.__version__
HAS_SIMD: bool = bool(_core.HAS_SIMD)
BACKENDS: tuple[str, ...] = ("seq", "simd") if HAS_SIMD else ("seq",)
DEFAULT_BACKEND: str = "simd" if HAS_SIMD else "seq"


class Status(enum.IntFlag):
    """A request's verification outcome (C++ ``specdec::verify_status``), as bit flags."""

    OK = 0
    RESIDUAL_FALLBACK = 1  # warning: the residual had no mass; the correction was sampled from p
    DRAFT_PROB_ZERO = 2  # warning: q(x) = 0 for a drafted x; rejected without a draw
    INVALID_ROW = 4  # error: a row read held NaN, inf, negative entries or no mass
    BAD_DRAFT_TOKEN = 8  # error: a drafted id outside [0, V); the request emits nothing
    NOT_NORMALISED = 16  # error: a row's sum is off by more than the tolerance (only when checked)


_ERRORS = int(Status.INVALID_ROW | Status.BAD_DRAFT_TOKEN | Status.NOT_NORMALISED)


def is_valid(status: Union[int, ArrayLike]) -> Union[bool, np.ndarray]:
    """True where no error flag is set (a bool, or a bool array for an array of statuses)."""
    s = np.asarray(status)
    valid = (s.astype(np.int64) & _ERRORS) == 0
    return bool(valid) if valid.ndim == 0 else valid


class RowStatus(enum.IntEnum):
    """What became of a sampled or transformed row (C++ ``specdec::row_status``)."""

    OK = 0
    NOT_FINITE = 1  # the row holds NaN or +inf (or a negative or infinite weight)
    NO_MASS = 2  # every entry is -inf (logits) or zero (weights)


class Purpose(enum.IntEnum):
    """What a draw is for: each purpose is its own stream (C++ ``specdec::random::purpose``)."""

    ACCEPT = 0
    RESAMPLE = 1
    DRAFT = 2
    TARGET_SAMPLE = 3
    VERIFIER = 4
    BEAM = 5
    SIMULATE = 6
    USER = 128


# ---- rules ----------------------------------------------------------------------------------------


class _Rule:
    """A rule: ``_kind`` names it to the extension (the C++ side's rule_spec), ``reads_q`` says whether
    it reads the draft's rows."""

    _kind = -1
    reads_q = True

    def _spec_args(self):
        """(kind, a, b, c, d): the C++ side's rule_spec."""
        return (self._kind, 0.0, 0.0, 0.0, 0)

    def _spec(self):
        return _core.RuleSpec(*self._spec_args())

    @functools.cached_property
    def _direct_spec(self):
        # made once (a rule is frozen) for the direct call (docs/python.md, "Call overhead"); a tuple, not
        # a RuleSpec, so that rules kept to the interpreter's end hold no extension object
        return self._spec_args()


@dataclass(frozen=True)
class Strict(_Rule):
    """Standard speculative sampling: accept x iff u q(x) < p(x); lossless."""

    _kind, reads_q = 0, True


@dataclass(frozen=True)
class Lenient(_Rule):
    """Accept x iff u l q(x) < p(x); exactly p for l >= 1, a closed-form mixture for l < 1."""

    lenience: float
    _kind, reads_q = 1, True

    def __post_init__(self):
        if not (isinstance(self.lenience, (int, float)) and math.isfinite(self.lenience) and self.lenience > 0):
            raise ValueError(f"Lenient: lenience must be finite and > 0, got {self.lenience!r}")

    def _spec_args(self):
        return (self._kind, float(self.lenience), 0.0, 0.0, 0)


@dataclass(frozen=True)
class Greedy(_Rule):
    """Accept x iff x == argmax p (lowest id on ties); emits argmax p on rejection."""

    _kind, reads_q = 2, False


@dataclass(frozen=True)
class SampleAndMatch(_Rule):
    """Accept x iff x == y, y ~ p sampled by the target; lossless, needs no q."""

    _kind, reads_q = 3, False


@dataclass(frozen=True)
class Block(_Rule):
    """Block verification (Sun et al., ICLR 2025); lossless."""

    _kind, reads_q = 4, True


@dataclass(frozen=True)
class Typical(_Rule):
    """Typical acceptance (Medusa): accept x iff p(x) > min(epsilon, delta exp(-H(p))); lossy."""

    epsilon: float = 0.09
    delta: float = 0.3
    log_offset: float = 0.0
    correction: str = "argmax"  # or "typical_sample"
    _kind, reads_q = 5, False

    def __post_init__(self):
        for name in ("epsilon", "delta", "log_offset"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"Typical: {name} must be finite and >= 0, got {v!r}")
        if self.correction not in ("argmax", "typical_sample"):
            raise ValueError(f"Typical: correction must be 'argmax' or 'typical_sample', got {self.correction!r}")

    def _spec_args(self):
        return (self._kind, float(self.epsilon), float(self.delta), float(self.log_offset),
                0 if self.correction == "argmax" else 1)


@dataclass(frozen=True)
class RecursiveRejection(_Rule):
    """Trees only: recursive rejection sampling, siblings drawn from q without replacement (Jeon et
    al.); lossless."""

    _kind, reads_q = 6, True


@dataclass(frozen=True)
class KSeq(_Rule):
    """Trees only: SpecTr's K-SEQ selection among i.i.d. siblings (Sun et al.); lossless."""

    _kind, reads_q = 7, True


@dataclass(frozen=True)
class TargetOnly(_Rule):
    """Trees only: siblings chosen without the coins (EAGLE, SGLang), tried with q := 1; lossless."""

    _kind, reads_q = 8, False


_CHAIN_RULES = (Strict, Lenient, Greedy, SampleAndMatch, Block, Typical)
_CHAIN_RULE_TYPES = frozenset(_CHAIN_RULES)  # exact types: the direct call's test (a subclass takes the checked path)
_TREE_RULES = (Strict, Greedy, SampleAndMatch, Typical, RecursiveRejection, KSeq, TargetOnly)


# ---- results --------------------------------------------------------------------------------------


class VerifyResult(NamedTuple):
    """tokens: int32 [B, max_n + 1], accepted drafts then one correction or bonus token, then -1;
    num_accepted: int32 [B]; status: uint8 [B] of ``Status`` flags."""

    tokens: np.ndarray
    num_accepted: np.ndarray
    status: np.ndarray

    def emitted(self, b: int) -> list[int]:
        """Request b's emitted tokens, without the -1 padding."""
        return [int(t) for t in self.tokens[b] if t != -1]


class TreeResult(NamedTuple):
    """tokens: int32 [B, D + 1], the accepted path's tokens then one correction or bonus token, then
    -1 (D the deepest node of the batch); path: int32 [B, D + 1], the accepted node ids, root (0)
    first, then -1; num_accepted: int32 [B]; status: uint8 [B] of ``Status`` flags."""

    tokens: np.ndarray
    path: np.ndarray
    num_accepted: np.ndarray
    status: np.ndarray

    def emitted(self, b: int) -> list[int]:
        """Request b's emitted tokens, without the -1 padding."""
        return [int(t) for t in self.tokens[b] if t != -1]


class SampleResult(NamedTuple):
    """tokens: int32 [R] (-1 where a row could not be sampled); status: uint8 [R] of ``RowStatus``."""

    tokens: np.ndarray
    status: np.ndarray


def _framework_of(rows):
    """torch when `rows` is a torch tensor (results then come back as torch tensors), else None (numpy)."""
    torch = sys.modules.get("torch")  # never imported here: a torch tensor means torch is loaded
    return torch if torch is not None and isinstance(rows, torch.Tensor) else None


def _returned(cls, arrays, rows):
    """New numpy `arrays` as a `cls` result, as torch tensors sharing their memory when `rows` (the
    call's row argument) is a torch tensor."""
    torch = _framework_of(rows)
    return cls._make(arrays) if torch is None else cls._make(map(torch.from_numpy, arrays))


# ---- argument checks (each error names the argument) ----------------------------------------------


def _backend(backend):
    if backend is None:
        return DEFAULT_BACKEND
    if backend not in BACKENDS:
        raise ValueError(f"backend: must be one of {BACKENDS}, got {backend!r}")
    return backend


def _shape(name, x):
    """The shape of a row array, which is passed on as it is (never converted)."""
    if type(x) is np.ndarray:  # the fast path: numpy's shape is a tuple of ints
        return x.shape
    shape = getattr(x, "shape", None)
    if shape is None or not (hasattr(x, "__dlpack__") or hasattr(x, "__array_interface__")):
        try:  # an object with the buffer protocol only (memoryview, array.array, ...): its shape from a view
            shape = memoryview(x).shape
        except TypeError:
            raise TypeError(f"{name}: must be an array (numpy.ndarray or another DLPack / buffer-protocol array) "
                            f"of float32 or float64, got {type(x).__name__}; specdec does not convert its inputs") from None
    return tuple(int(s) for s in shape)


# dtype objects, not numpy's scalar types: an ndarray's dtype compares with them about twice as fast
_I32, _U32, _U64, _U8 = np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.uint64), np.dtype(np.uint8)
_RANGE = {t: (int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in (_I32, _U32, _U64)}
_SMALL = 256  # below this many entries, Python's min/max and np.array beat numpy's reductions and np.full


def _in_range(a, lo, hi):
    """Whether every entry of the integer array `a` lies in [lo, hi]."""
    if a.size == 0:
        return True
    if a.size <= _SMALL:
        v = a.ravel().tolist()
        return lo <= min(v) and max(v) <= hi
    return lo <= a.min() and a.max() <= hi


def _ints(name, x, n, dtype, lo, hi, broadcast=True):
    """A small per-request integer array of length n (a scalar is repeated when `broadcast`), as `dtype`."""
    if type(x) is np.ndarray:  # fast paths first: a decode loop calls this several times per step
        if x.dtype == dtype and x.shape == (n,) and x.flags.c_contiguous:
            tmin, tmax = _RANGE[x.dtype]
            if (lo <= tmin and tmax <= hi) or _in_range(x, lo, hi):  # nothing to copy
                return x
    elif type(x) is int and (broadcast or n == 1):
        if not lo <= x <= hi:
            raise ValueError(f"{name}: values must lie in [{lo}, {hi}]")
        return np.array([x] * n, dtype) if n <= _SMALL else np.full(n, x, dtype)
    elif type(x) in (list, tuple) and len(x) == n <= _SMALL and all(type(v) is int for v in x):
        if n and not (lo <= min(x) and max(x) <= hi):
            raise ValueError(f"{name}: values must lie in [{lo}, {hi}]")
        return np.array(x, dtype)
    a = np.asarray(x)
    if a.size == 0 and a.dtype.kind == "f":  # [] is float64 to numpy
        a = a.astype(dtype)
    if a.dtype == np.bool_ or a.dtype.kind not in "iu":
        raise TypeError(f"{name}: must be integers, got dtype {a.dtype}")
    if a.ndim == 0 and (broadcast or n == 1):
        a = np.full(n, a, dtype=a.dtype)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {a.shape}")
    if not _in_range(a, lo, hi):
        raise ValueError(f"{name}: values must lie in [{lo}, {hi}]")
    return np.ascontiguousarray(a, dtype=dtype)


def _floats(name, x, n):
    """A small per-request float parameter of length n (a scalar is repeated), as float64."""
    if type(x) in (float, int):
        return np.array([x] * n, np.float64) if n <= _SMALL else np.full(n, x, np.float64)
    if type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (n,) and x.flags.c_contiguous:
        return x
    a = np.asarray(x)
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise TypeError(f"{name}: must be real numbers, got dtype {a.dtype}")
    if a.ndim == 0:
        a = np.full(n, a, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected a scalar or shape ({n},), got {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float64)


def _streams(n, seeds, request_ids, steps):
    return (_ints("seeds", seeds, n, _U64, 0, 2**64 - 1),
            _ints("request_ids", request_ids, n, _U32, 0, 2**32 - 1, broadcast=False),
            _ints("steps", steps, n, _U32, 0, 2**32 - 1))


def _output_positions(n, output_positions):
    # 2**32 - 1 is the C++ library's `keyed_by_round`, so it is not an output position
    return None if output_positions is None else _ints("output_positions", output_positions, n, _U32, 0, 2**32 - 2)


_NO_WARP = (1.0, 0, 1.0, 0.0)  # temperature, top_k, top_p, min_p that leave a row as it is


def _warp(prefix, n, temperature, top_k, top_p, min_p):
    return (_floats(prefix + "temperature", temperature, n),
            _ints(prefix + "top_k", top_k, n, _I32, 0, 2**31 - 1),
            _floats(prefix + "top_p", top_p, n),
            _floats(prefix + "min_p", min_p, n))


def _rule(rule, rules=_CHAIN_RULES):
    if not isinstance(rule, rules):
        names = ", ".join(f"{r.__name__}()" for r in rules)
        raise TypeError(f"rule: must be one of {names}, got {type(rule).__name__}")
    return rule


class _Chain(NamedTuple):
    packed: bool
    num_drafts: np.ndarray
    max_drafts: int
    vocab: int
    draft_tokens: np.ndarray
    batch: int


def _token_ids(name, x, shape=None):
    """Token ids as a C-contiguous int32 array (of `shape` when given). Ids outside [0, V) are
    flagged by the kernels, not here; ids that do not fit in int32 are refused."""
    if type(x) is np.ndarray and x.dtype == _I32 and x.flags.c_contiguous and (shape is None or x.shape == shape):
        return x
    t = np.asarray(x)
    if t.size == 0 and t.dtype.kind == "f":  # [] is float64 to numpy
        t = t.astype(_I32)
    if t.dtype == np.bool_ or t.dtype.kind not in "iu":
        raise TypeError(f"{name}: must be integers, got dtype {t.dtype}")
    if shape is not None and t.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {t.shape}")
    if t.dtype != _I32 and not _in_range(t, -(2**31), 2**31 - 1):
        raise ValueError(f"{name}: ids must fit in int32 (ids outside [0, V) that do fit are flagged BAD_DRAFT_TOKEN)")
    return np.ascontiguousarray(t, dtype=_I32)


def _counts(name, x, total, lo):
    """Per-request counts (a 1-D array of B entries >= lo) that must sum to `total`, as int32."""
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {a.shape}")
    c = _ints(name, a, a.shape[0], _I32, lo, total)
    if int(c.sum()) != total:
        raise ValueError(f"{name}: must sum to {total} (the packed length), sums to {int(c.sum())}")
    return c


def _check_rows(name, rows, shape):
    """A row array (or None) must have `shape`."""
    if rows is not None and _shape(name, rows) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {_shape(name, rows)}")


def _needs_q(rule, name, rows, alternatives=""):
    if rows is None and rule.reads_q:
        raise ValueError(f"{name}: {type(rule).__name__}() reads the draft's rows q; pass {alternatives or 'them'}")


def _chain(draft_tokens, target_name, target, num_drafts, cu_num_drafts, draft_rows):
    """Checks a chain batch's shapes. Padded: draft_tokens [B, n], draft rows [B, n, V], target rows
    [B, n + 1, V]. Packed: draft_tokens [N], num_drafts [B] summing to N, draft rows [N, V], target
    rows [N + B, V]. `draft_rows` is a list of (name, array or None) with draft_tokens' leading shape."""
    t = _token_ids("draft_tokens", draft_tokens)
    tshape = _shape(target_name, target)
    if num_drafts is not None and cu_num_drafts is not None:
        raise ValueError("num_drafts and cu_num_drafts: give at most one")
    if t.ndim == 2:  # padded
        B, n = t.shape
        if len(tshape) != 3 or tshape[:2] != (B, n + 1):
            raise ValueError(f"{target_name}: expected shape ({B}, {n + 1}, V) for draft_tokens of shape {t.shape}, got {tshape}")
        if cu_num_drafts is not None:
            raise ValueError("cu_num_drafts: only for the packed layout (1-D draft_tokens)")
        nd = _ints("num_drafts", n if num_drafts is None else num_drafts, B, _I32, 0, n)
        packed, max_drafts = False, n
    elif t.ndim == 1:  # packed
        N = t.shape[0]
        if cu_num_drafts is not None:
            cu = np.asarray(cu_num_drafts)
            if cu.ndim != 1:
                raise ValueError(f"cu_num_drafts: expected a 1-D array, got shape {cu.shape}")
            num_drafts = np.diff(np.concatenate([[0], cu.astype(np.int64)]))
        if num_drafts is None:
            raise ValueError("num_drafts: required with packed (1-D) draft_tokens (or give cu_num_drafts)")
        nd = _counts("num_drafts", num_drafts, N, 0)
        B = nd.shape[0]
        if len(tshape) != 2 or tshape[0] != N + B:
            raise ValueError(f"{target_name}: expected shape ({N + B}, V) (one row per draft plus one per request), got {tshape}")
        packed, max_drafts = True, int(nd.max()) if B else 0
    else:
        raise ValueError(f"draft_tokens: expected 2-D [B, n] (padded) or 1-D [N] (packed), got {t.ndim}-D")
    V = tshape[-1]
    if V < 1:
        raise ValueError(f"{target_name}: the vocabulary (last) dimension must be >= 1")
    for name, rows in draft_rows:
        _check_rows(name, rows, t.shape + (V,))
    return _Chain(packed, nd, max_drafts, V, t, B)


def _out(out, c):
    """The caller's output arrays (tokens [B, W], num_accepted [B], status [B]) for the extension, or
    None (it allocates new ones)."""
    if out is None:
        return None
    if len(out) != 3:
        raise ValueError("out: expected (tokens, num_accepted, status)")
    t, n, s = out
    B = c.batch
    if (type(t) is np.ndarray and type(n) is np.ndarray and type(s) is np.ndarray  # the fast path: all good
            and t.dtype == _I32 and n.dtype == _I32 and s.dtype == _U8
            and t.shape == (B, c.max_drafts + 1) and n.shape == (B,) and s.shape == (B,)
            and t.flags.c_contiguous and n.flags.c_contiguous and s.flags.c_contiguous
            and t.flags.writeable and n.flags.writeable and s.flags.writeable):
        return _core.OutArrays(t, n, s)
    for name, a, shape, dtype in zip(("tokens", "num_accepted", "status"), out,
                                     ((B, c.max_drafts + 1), (B,), (B,)), (_I32, _I32, _U8)):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"out.{name}: must be a numpy array")
        if a.dtype != dtype:
            raise TypeError(f"out.{name}: dtype must be {dtype.name}, got {a.dtype}")
        if not a.flags.c_contiguous or not a.flags.writeable:
            raise TypeError(f"out.{name}: must be C-contiguous and writable")
        if a.shape != shape:
            raise ValueError(f"out.{name}: expected shape {shape}, got {a.shape}")
    return _core.OutArrays(*out)  # ndarray subclasses that pass every check


def _result(ret, out, rows):
    return VerifyResult(*out) if ret is None else _returned(VerifyResult, ret, rows)


# ---- verification ---------------------------------------------------------------------------------


def verify(rule: _Rule, draft_tokens: ArrayLike, draft_probs: Optional[ArrayLike], target_probs: ArrayLike, *,
           seeds: ArrayLike, request_ids: ArrayLike, steps: ArrayLike, num_drafts: Optional[ArrayLike] = None,
           cu_num_drafts: Optional[ArrayLike] = None, output_positions: Optional[ArrayLike] = None,
           backend: Optional[str] = None, check_normalisation: bool = False, normalisation_tolerance: float = 1e-3,
           out: Optional[tuple] = None) -> VerifyResult:
    """Verifies drafted chains against target probabilities (C++ ``specdec::verify``).

    Padded layout (FlashInfer's): draft_tokens [B, n], draft_probs [B, n, V], target_probs
    [B, n + 1, V]; ``num_drafts`` [B] (default n) marks rows past n_b unused.
    Packed layout (vLLM's): draft_tokens [N], draft_probs [N, V], target_probs [N + B, V] (request
    b's n_b rows then its bonus row), with ``num_drafts`` [B] or ``cu_num_drafts`` (prefix sums).
    draft_probs may be None for rules that never read q (Greedy, SampleAndMatch, Typical).
    seeds (uint64), request_ids (uint32, one per request), steps (uint32) address each request's
    randomness; seeds and steps may be scalars. ``output_positions`` (uint32, a scalar or one per
    request; default None: keyed by ``steps``) keys the target's own samples (sample-and-match's, the
    bonus) by the index in the request's output of the token chain position 0 decides, so a request
    decoded with any drafter emits what target-only decoding emits (docs/python.md, "Randomness").
    Returns a ``VerifyResult``; with ``out`` (a
    VerifyResult or tuple of int32 [B, max_n + 1], int32 [B], uint8 [B] arrays) the results are
    written into those arrays, which are returned.
    """
    if cu_num_drafts is None and type(rule) in _CHAIN_RULE_TYPES:  # arguments already in final form: no checks here
        ret = _core.verify_direct(rule._direct_spec, DEFAULT_BACKEND if backend is None else backend, draft_tokens,
                                  draft_probs, target_probs, seeds, request_ids, steps, num_drafts, output_positions,
                                  check_normalisation, normalisation_tolerance, out)
        if ret is not None:
            return VerifyResult._make(ret) if out is not None else _returned(VerifyResult, ret, target_probs)
    rule = _rule(rule)
    _needs_q(rule, "draft_probs", draft_probs)
    c = _chain(draft_tokens, "target_probs", target_probs, num_drafts, cu_num_drafts, [("draft_probs", draft_probs)])
    s, r, t = _streams(c.batch, seeds, request_ids, steps)
    ret = _core.verify(rule._spec(), _backend(backend), c.packed, c.num_drafts, c.max_drafts, c.vocab, c.draft_tokens,
                       draft_probs, target_probs, s, r, t, _output_positions(c.batch, output_positions),
                       bool(check_normalisation), float(normalisation_tolerance), _out(out, c))
    return _result(ret, out, target_probs)


def verify_from_logits(rule: _Rule, draft_tokens: ArrayLike, target_logits: ArrayLike, *, seeds: ArrayLike,
                       request_ids: ArrayLike, steps: ArrayLike, draft_logits: Optional[ArrayLike] = None,
                       draft_probs: Optional[ArrayLike] = None, q_at_drafts: Optional[ArrayLike] = None,
                       num_drafts: Optional[ArrayLike] = None, cu_num_drafts: Optional[ArrayLike] = None,
                       output_positions: Optional[ArrayLike] = None, temperature: ArrayLike = 1.0,
                       top_k: ArrayLike = 0, top_p: ArrayLike = 1.0, min_p: ArrayLike = 0.0,
                       draft_temperature: Optional[ArrayLike] = None, draft_top_k: Optional[ArrayLike] = None,
                       draft_top_p: Optional[ArrayLike] = None, draft_min_p: Optional[ArrayLike] = None,
                       backend: Optional[str] = None, out: Optional[tuple] = None) -> VerifyResult:
    """Verifies from logits (C++ ``specdec::verify_from_logits``): every target row that is read is
    warped with its request's temperature / top_k / top_p / min_p (scalars or one per request), and
    target samples (sample-and-match's, the bonus) are drawn from logits.

    The draft side (q, the warped rows the drafts were sampled from) is one of:
    ``draft_logits`` (warped with the draft_* parameters, by default the target's), ``draft_probs``
    (the warped rows themselves), and optionally ``q_at_drafts`` (q_i(x_i) of every draft, vLLM's
    gathered ``draft_probs``, shaped like draft_tokens). Layouts, streams, ``output_positions``, result
    and ``out`` as ``verify``.
    """
    if cu_num_drafts is None and type(rule) in _CHAIN_RULE_TYPES:  # arguments already in final form: no checks here
        ret = _core.verify_from_logits_direct(
            rule._direct_spec, DEFAULT_BACKEND if backend is None else backend, draft_tokens, target_logits, seeds,
            request_ids, steps, draft_logits, draft_probs, q_at_drafts, num_drafts, output_positions, temperature, top_k,
            top_p, min_p, draft_temperature, draft_top_k, draft_top_p, draft_min_p, out)
        if ret is not None:
            return VerifyResult._make(ret) if out is not None else _returned(VerifyResult, ret, target_logits)
    rule = _rule(rule)
    if draft_logits is not None and draft_probs is not None:
        raise ValueError("draft_logits and draft_probs: give at most one")
    rows = draft_probs if draft_probs is not None else draft_logits
    rows_name = "draft_probs" if draft_probs is not None else "draft_logits"
    _needs_q(rule, "draft_logits", rows, "draft_logits or draft_probs")
    c = _chain(draft_tokens, "target_logits", target_logits, num_drafts, cu_num_drafts, [(rows_name, rows)])
    _check_rows("q_at_drafts", q_at_drafts, c.draft_tokens.shape)
    s, r, t = _streams(c.batch, seeds, request_ids, steps)
    tw = _warp("", c.batch, temperature, top_k, top_p, min_p)
    draft_warp = (draft_temperature, draft_top_k, draft_top_p, draft_min_p)
    dw = (None,) * 4
    if any(x is not None for x in draft_warp):
        if draft_logits is None:
            raise ValueError("draft_temperature, draft_top_k, draft_top_p, draft_min_p: only with draft_logits")
        dw = _warp("draft_", c.batch, *(d if x is None else x for x, d in zip(draft_warp, _NO_WARP)))
    ret = _core.verify_from_logits(rule._spec(), _backend(backend), c.packed, c.num_drafts, c.max_drafts, c.vocab,
                                   c.draft_tokens, rows, draft_probs is not None, q_at_drafts, target_logits, s, r, t,
                                   _output_positions(c.batch, output_positions), *tw, *dw, _out(out, c))
    return _result(ret, out, target_logits)


def verify_tree(rule: _Rule, parents: ArrayLike, tokens: ArrayLike, draft_probs: Optional[ArrayLike],
                target_probs: ArrayLike, *, seeds: ArrayLike, request_ids: ArrayLike, steps: ArrayLike,
                num_nodes: Optional[ArrayLike] = None, backend: Optional[str] = None,
                check_normalisation: bool = False, normalisation_tolerance: float = 1e-3) -> TreeResult:
    """Verifies drafted token trees (C++ ``specdec::verify_tree``). Node 0 of each tree is the root
    (the verified context: parent -1, its token ignored); every other node's parent is an earlier
    node (local ids). Every node has a target row p(. | context, path to the node) and, for rules
    that read q, a draft row (the distribution its children were drawn from).

    Packed: parents [N], tokens [N], target_probs [N, V], draft_probs [N, V], ``num_nodes`` [B]
    summing to N (default: one tree of N nodes, none when N = 0). Same-size trees: parents [B, n], tokens [B, n],
    rows [B, n, V]. Rules: Strict() (SpecInfer's multi-step sampling), RecursiveRejection(),
    KSeq(), TargetOnly(), Greedy(), SampleAndMatch(), Typical(...); draft_probs may be None for
    the rules that never read q (TargetOnly, Greedy, SampleAndMatch, Typical). Streams as
    ``verify``. Returns a ``TreeResult``.
    """
    return _verify_tree(rule, parents, tokens, draft_probs, "target_probs", target_probs, seeds, request_ids, steps,
                        num_nodes, backend, check_normalisation, normalisation_tolerance, None)


def verify_tree_from_logits(rule: _Rule, parents: ArrayLike, tokens: ArrayLike, draft_probs: Optional[ArrayLike],
                            target_logits: ArrayLike, *, seeds: ArrayLike, request_ids: ArrayLike, steps: ArrayLike,
                            num_nodes: Optional[ArrayLike] = None, temperature: ArrayLike = 1.0, top_k: ArrayLike = 0,
                            top_p: ArrayLike = 1.0, min_p: ArrayLike = 0.0, backend: Optional[str] = None,
                            check_normalisation: bool = False, normalisation_tolerance: float = 1e-3) -> TreeResult:
    """``verify_tree`` from target logits (C++ ``specdec::verify_tree_from_logits``): every node's
    target row that is read is warped with its request's temperature / top_k / top_p / min_p
    (scalars or one per tree: one renormalisation, as ``warp_logits``), and target samples (the
    correction of the target-only and sample-and-match rules, the bonus) are drawn from the warped
    rows. ``draft_probs`` are the draft's warped probability rows (what the children were drawn
    from), or None for the rules that never read q. Layouts, rules, streams and result as ``verify_tree``.
    """
    return _verify_tree(rule, parents, tokens, draft_probs, "target_logits", target_logits, seeds, request_ids, steps,
                        num_nodes, backend, check_normalisation, normalisation_tolerance,
                        (temperature, top_k, top_p, min_p))


def _verify_tree(rule, parents, tokens, draft_probs, target_name, target, seeds, request_ids, steps, num_nodes, backend,
                 check_normalisation, normalisation_tolerance, warp):
    rule = _rule(rule, _TREE_RULES)
    _needs_q(rule, "draft_probs", draft_probs)
    par = np.asarray(parents)
    if par.ndim == 2:  # B trees of n nodes each
        if num_nodes is not None:
            raise ValueError("num_nodes: only with packed (1-D) parents; [B, n] parents are B trees of n nodes")
        B, n = par.shape
        nn = np.full(B, n, _I32)
    elif par.ndim == 1:
        N = par.shape[0]
        nn = _counts("num_nodes", ([N] if N else []) if num_nodes is None else num_nodes, N, 1)  # [] parents: no tree
    else:
        raise ValueError(f"parents: expected 1-D [N] (packed) or 2-D [B, n], got {par.ndim}-D")
    lead = par.shape
    par = _ints("parents", par.reshape(-1), par.size, _I32, -1, 2**31 - 1)
    tok = _token_ids("tokens", tokens, lead)
    tshape = _shape(target_name, target)
    if len(tshape) != len(lead) + 1 or tshape[:-1] != lead or tshape[-1] < 1:
        raise ValueError(f"{target_name}: expected shape {lead + ('V',)} with V >= 1, got {tshape}")
    V = tshape[-1]
    _check_rows("draft_probs", draft_probs, lead + (V,))
    s, r, t = _streams(len(nn), seeds, request_ids, steps)
    w = (None,) * 4 if warp is None else _warp("", len(nn), *warp)
    return _returned(TreeResult, _core.verify_tree(rule._spec(), _backend(backend), nn, par, V, tok, draft_probs, target,
                                                   s, r, t, bool(check_normalisation), float(normalisation_tolerance), *w),
                     target)


# ---- sampling and row transforms ------------------------------------------------------------------


def _rows(name, x, ndims=(2,)):
    """The shape of a row array of `ndims` dimensions (rows [R, V], or also [V]) with V >= 1."""
    shape = _shape(name, x)
    if len(shape) not in ndims or shape[-1] < 1:
        want = " or ".join(("(V,)", "(R, V)")[d - 1] for d in ndims)
        raise ValueError(f"{name}: expected shape {want} with V >= 1, got {shape}")
    return shape


def _below(name, x, bound, shown):
    """An integer in [0, bound)."""
    v = int(x)
    if not 0 <= v < bound:
        raise ValueError(f"{name}: must lie in [0, {shown}), got {x!r}")
    return v


def sample(probs: ArrayLike, *, seeds: ArrayLike, request_ids: ArrayLike, steps: ArrayLike, position: int = 0,
           purpose: int = Purpose.TARGET_SAMPLE, backend: Optional[str] = None) -> SampleResult:
    """One token per row of ``probs`` [R, V] (weights, need not sum to 1), row r drawing the uniform
    of its own stream (seeds[r], request_ids[r], steps[r], position, purpose). Returns a ``SampleResult``."""
    ret = _core.sample_direct(DEFAULT_BACKEND if backend is None else backend, probs, seeds, request_ids, steps,
                              position, purpose)  # arguments already in final form: no checks here
    if ret is not None:
        return _returned(SampleResult, ret, probs)
    R, V = _rows("probs", probs)
    s, r, t = _streams(R, seeds, request_ids, steps)
    return _returned(SampleResult, _core.sample(_backend(backend), probs, V, s, r, t, _position(position),
                                                _purpose(purpose)), probs)


def sample_logits(logits: ArrayLike, *, seeds: ArrayLike, request_ids: ArrayLike, steps: ArrayLike,
                  temperature: ArrayLike = 1.0, top_k: ArrayLike = 0, top_p: ArrayLike = 1.0, min_p: ArrayLike = 0.0,
                  position: int = 0, purpose: int = Purpose.TARGET_SAMPLE,
                  backend: Optional[str] = None) -> SampleResult:
    """One token per row of warp(softmax(logits / T)) with each row's temperature / top_k / top_p /
    min_p (scalars or one per row) and its own stream, as ``sample``. Returns a ``SampleResult``."""
    ret = _core.sample_logits_direct(DEFAULT_BACKEND if backend is None else backend, logits, seeds, request_ids, steps,
                                     temperature, top_k, top_p, min_p, position, purpose)
    if ret is not None:
        return _returned(SampleResult, ret, logits)
    R, V = _rows("logits", logits)
    s, r, t = _streams(R, seeds, request_ids, steps)
    w = _warp("", R, temperature, top_k, top_p, min_p)
    return _returned(SampleResult, _core.sample_logits(_backend(backend), logits, V, s, r, t, _position(position),
                                                       _purpose(purpose), *w), logits)


def _position(position):
    return _below("position", position, 2**32, "2**32")


def _purpose(purpose):
    return _below("purpose", purpose, 256, "256")


def _row_transform(kernel, logits, backend, return_status, params):
    """Runs a row kernel (softmax, warp_logits) on [R, V] or [V] logits; `params(R)` gives its
    per-row parameter arrays. The result has the input's shape."""
    shape = _rows("logits", logits, (1, 2))
    probs, status = kernel(_backend(backend), logits, shape[-1], *params(shape[0] if len(shape) == 2 else 1))
    probs = probs.reshape(shape)
    torch = _framework_of(logits)
    if torch is not None:
        probs, status = torch.from_numpy(probs), torch.from_numpy(status)
    return (probs, status) if return_status else probs


def softmax(logits: ArrayLike, temperature: Optional[ArrayLike] = None, *, backend: Optional[str] = None,
            return_status: bool = False) -> Union[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """softmax(logits / T) per row of ``logits`` [R, V] or [V] (T: None for 1, a scalar or one per
    row). The result has the input's shape, dtype and framework (numpy, or torch for a torch tensor);
    with ``return_status`` also a uint8 array of ``RowStatus`` per row (a NaN or all -inf row is
    flagged, not raised)."""
    return _row_transform(_core.softmax, logits, backend, return_status,
                          lambda R: (np.empty(0) if temperature is None else _floats("temperature", temperature, R),))


def warp_logits(logits: ArrayLike, temperature: ArrayLike = 1.0, top_k: ArrayLike = 0, top_p: ArrayLike = 1.0,
                min_p: ArrayLike = 0.0, *, backend: Optional[str] = None,
                return_status: bool = False) -> Union[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """warp(softmax(logits / T)) per row: temperature, then top-k, top-p and min-p, one
    renormalisation (C++ ``specdec::warp_logits``); parameters are scalars or one per row. Shape,
    dtype and ``return_status`` as ``softmax``."""
    return _row_transform(_core.warp_logits, logits, backend, return_status,
                          lambda R: _warp("", R, temperature, top_k, top_p, min_p))


# ---- the random streams ---------------------------------------------------------------------------


def uniform(seed: int, request: int, step: int, position: int, purpose: int, index: int = 0) -> float:
    """The index-th uniform double in [0, 1) of the stream (seed, request, step, position, purpose):
    the draws the kernels make (e.g. the accept test of draft i reads uniform(..., i, Purpose.ACCEPT))."""
    return _core.uniform(int(seed), int(request), int(step), int(position), _purpose(purpose), int(index))


def philox4x32_10(counter: ArrayLike, key: ArrayLike) -> tuple[int, int, int, int]:
    """Philox4x32-10 of four 32-bit counter words and two key words: four 32-bit words."""
    c, k = [int(x) for x in counter], [int(x) for x in key]
    if len(c) != 4 or len(k) != 2:
        raise ValueError("philox4x32_10: counter has 4 words and key 2")
    return _core.philox4x32_10(*c, *k)


# ---- the step decoder (specdec/decoder.py: it reads the rules above) -------------------------------

from .decoder import Decoder, StepEvent  # noqa: E402

"""The one argument-handling path of specdec.theory: broadcast, check, convert, call, reshape."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._core import Error

_INT32 = np.iinfo(np.int32)


def _array(where, name, x):
    a = np.asarray(x)
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise TypeError(f"{where}: {name}: must be real numbers, got {type(x).__name__} of dtype {a.dtype}")
    return a


def _integers(where, name, a):
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a) & (a == np.round(a))):
            raise TypeError(f"{where}: {name}: must be integers, got non-integral values")
    if a.size and (a.min() < _INT32.min or a.max() > _INT32.max):
        raise ValueError(f"{where}: {name}: must fit in int32")
    return a


def broadcast(where, params):
    """Broadcasts the parameters ``{name: (kind, value)}`` (``"f"`` a real, ``"i"`` an integer, ``"r"``
    a row with its entries on the last axis) and flattens them for the extension: returns the
    broadcast shape and one C-contiguous array per parameter (n entries, or [n, K] rows)."""
    arrays, lead = [], []
    for name, (kind, x) in params.items():
        a = _array(where, name, x)
        if kind == "r":
            if a.ndim == 0:
                raise ValueError(f"{where}: {name}: expected an array whose last axis holds the entries, got a scalar")
            lead.append(a.shape[:-1])
        else:
            if kind == "i":
                a = _integers(where, name, a)
            lead.append(a.shape)
        arrays.append((name, kind, a))
    try:
        shape = np.broadcast_shapes(*lead)
    except ValueError:
        raise ValueError(f"{where}: the parameters' shapes do not broadcast: "
                         + ", ".join(f"{n} {a.shape}" for n, _, a in arrays)) from None
    flat = []
    for _, kind, a in arrays:
        if kind == "r":
            rows = np.broadcast_to(a, shape + a.shape[-1:])
            flat.append(np.ascontiguousarray(rows, np.float64).reshape(-1, a.shape[-1]))
        else:
            dtype = np.int32 if kind == "i" else np.float64
            flat.append(np.ascontiguousarray(np.broadcast_to(a, shape), dtype).reshape(-1))
    return shape, flat


def vmap(function, where, **params):
    """Calls ``_core.theory_<function>`` on the broadcast parameters. Each keyword is a parameter:
    ``("f", x)`` a real, ``("i", x)`` an integer, ``("r", x)`` a row (entries on the last axis).
    Returns an array of the broadcast shape, or a Python scalar when it is ()."""
    shape, flat = broadcast(where, params)
    try:
        out = getattr(_core, "theory_" + function)(*flat)
    except Error as e:
        raise Error(f"{where}: {e}") from None
    out = out.reshape(shape)
    return out.item() if out.ndim == 0 else out

"""Inputs through DLPack and the buffer protocol: accepted without a copy (the kernels read the
caller's memory: checked by address and by writing through), and refused with a TypeError naming the
argument when non-contiguous, of a wrong dtype or in device memory. numpy is the only producer
installed here (no torch, no CuPy): numpy's own ``__dlpack__``, objects that expose only
``__dlpack__``/``__dlpack_device__``, only the buffer protocol (``memoryview``), and a hand-made
DLPack capsule that says CUDA."""

import ctypes

import numpy as np
import pytest

import specdec

V = 8


class DLPackOnly:
    """Exposes an array through ``__dlpack__``/``__dlpack_device__`` (and ``shape``) only: no
    ``__array__``, no ``__array_interface__``, no buffer protocol."""

    def __init__(self, a):
        self._a = a
        self.shape = a.shape

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class FakeCuda:
    """A float32 array that says, through an (unversioned) DLPack capsule, that it lives on CUDA
    device 0 (kDLCUDA = 2). Its memory is host memory and is never read: it must be refused first."""

    def __init__(self, a):
        self._a = np.ascontiguousarray(a, np.float32)
        self.shape = self._a.shape
        self._shape = (ctypes.c_int64 * self._a.ndim)(*self._a.shape)
        self._m = _DLManagedTensor()
        self._m.dl_tensor = _DLTensor(self._a.ctypes.data, _DLDevice(2, 0), self._a.ndim, _DLDataType(2, 32, 1),
                                      self._shape, None, 0)
        self._m.deleter = None

    def __dlpack__(self, **kwargs):  # any max_version is answered with an unversioned capsule, as DLPack allows
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._m), b"dltensor", None)

    def __dlpack_device__(self):
        return (2, 0)


def rows(B=2, n=3, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((B, n, V)).astype(dtype)
    p = rng.random((B, n + 1, V)).astype(dtype)
    q /= q.sum(-1, keepdims=True)
    p /= p.sum(-1, keepdims=True)
    drafts = np.argmax(q, axis=-1).astype(np.int32)
    return drafts, q, p


KW = dict(seeds=3, request_ids=[0, 1], steps=0)


@pytest.mark.parametrize("wrap", [np.from_dlpack, DLPackOnly, memoryview], ids=["from_dlpack", "dlpack_only", "buffer"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inputs_through_dlpack_or_the_buffer_protocol_are_read_in_place(wrap, dtype):
    drafts, q, p = rows(dtype=dtype)
    wq, wp = wrap(q), wrap(p)
    assert specdec._core._data_address(wq) == q.__array_interface__["data"][0]
    assert specdec._core._data_address(wp) == p.__array_interface__["data"][0]
    ref = specdec.verify(specdec.Strict(), drafts, q, p, **KW)
    got = specdec.verify(specdec.Strict(), drafts, wq, wp, **KW)
    np.testing.assert_array_equal(got.tokens, ref.tokens)
    # write-through: change the caller's target rows behind the wrapper; the next call sees it
    p[:, 0] = 0.0
    p[:, 0, 5] = 1.0  # the target is now certain of token 5 at the first position
    q[:, 0] = 0.0
    q[:, 0, 2] = 1.0  # and the draft certain of token 2 (drafted): always rejected, the correction is 5
    after = specdec.verify(specdec.Strict(), np.full_like(drafts, 2), wq, wp, **KW)
    assert (after.tokens[:, 0] == 5).all() and (after.num_accepted == 0).all()


@pytest.mark.parametrize("wrap", [np.from_dlpack, DLPackOnly, memoryview], ids=["from_dlpack", "dlpack_only", "buffer"])
def test_sampling_and_logits_entries_take_them_too(wrap):
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((6, V)).astype(np.float32)
    ref = specdec.sample_logits(logits, temperature=0.8, seeds=1, request_ids=np.arange(6), steps=0)
    got = specdec.sample_logits(wrap(logits), temperature=0.8, seeds=1, request_ids=np.arange(6), steps=0)
    np.testing.assert_array_equal(got.tokens, ref.tokens)
    np.testing.assert_array_equal(specdec.softmax(wrap(logits)), specdec.softmax(logits))


@pytest.mark.parametrize("wrap", [np.from_dlpack, DLPackOnly, memoryview], ids=["from_dlpack", "dlpack_only", "buffer"])
def test_non_contiguous_and_wrong_dtype_are_refused_naming_the_argument(wrap):
    drafts, q, p = rows()
    wide = np.repeat(p, 2, axis=-1)
    with pytest.raises(TypeError, match="target_probs: must be C-contiguous"):
        specdec.verify(specdec.Strict(), drafts, q, wrap(wide[..., ::2]), **KW)
    with pytest.raises(TypeError, match="draft_probs: dtype must be float32 or float64, got float16"):
        specdec.verify(specdec.Strict(), drafts, wrap(q.astype(np.float16)), p, **KW)
    with pytest.raises(TypeError, match="draft_probs: dtype must be float32 or float64, got int32"):
        specdec.verify(specdec.Strict(), drafts, wrap(q.astype(np.int32)), p, **KW)
    with pytest.raises(TypeError, match="logits: must be C-contiguous"):
        specdec.softmax(wrap(np.asfortranarray(p[0])))


def test_device_memory_is_refused_naming_the_argument():
    drafts, q, p = rows()
    assert np.from_dlpack is not None  # the capsule is well formed: numpy itself refuses it as non-CPU
    with pytest.raises((BufferError, RuntimeError, ValueError, TypeError)):
        np.from_dlpack(FakeCuda(p))
    with pytest.raises(TypeError, match="target_probs: must be in CPU memory"):
        specdec.verify(specdec.Strict(), drafts, q, FakeCuda(p), **KW)
    with pytest.raises(TypeError, match="draft_probs: must be in CPU memory"):
        specdec.verify(specdec.Strict(), drafts, FakeCuda(q), p, **KW)
    with pytest.raises(TypeError, match="logits: must be in CPU memory"):
        specdec.sample_logits(FakeCuda(p[0]), seeds=0, request_ids=np.arange(4), steps=0)


def test_objects_that_are_not_arrays_are_refused():
    drafts, q, p = rows()
    with pytest.raises(TypeError, match="target_probs: must be an array"):
        specdec.verify(specdec.Strict(), drafts, q, object(), **KW)
    with pytest.raises(TypeError, match="target_probs: dtype must be float32 or float64, got uint8"):
        specdec.verify(specdec.Strict(), drafts, q, memoryview(np.zeros(p.shape, np.uint8)), **KW)
    with pytest.raises(TypeError, match="target_probs: must be an array"):
        specdec.verify(specdec.Strict(), drafts, q, p.tolist(), **KW)

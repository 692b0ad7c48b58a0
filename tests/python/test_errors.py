"""Refused inputs (TypeError / ValueError naming the argument), no copies, the GIL released."""

import threading
import time

import numpy as np
import pytest

import specdec

Q = np.full((2, 3, 8), 1 / 8, np.float32)
P = np.full((2, 4, 8), 1 / 8, np.float32)
D = np.zeros((2, 3), np.int32)
KW = dict(seeds=0, request_ids=[0, 1], steps=0)


def verify(drafts=D, q=Q, p=P, rule=specdec.Strict(), **kw):
    return specdec.verify(rule, drafts, q, p, **{**KW, **kw})


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.complex64])
def test_wrong_dtype_is_refused_naming_the_argument(dtype):
    with pytest.raises(TypeError, match="draft_probs: dtype must be float32 or float64"):
        verify(q=Q.astype(dtype))
    with pytest.raises(TypeError, match="target_probs: dtype must be float32 or float64"):
        verify(p=P.astype(dtype))
    with pytest.raises(TypeError, match="probs: dtype"):
        specdec.sample(P[0].astype(dtype), seeds=0, request_ids=[0, 1, 2, 3], steps=0)
    with pytest.raises(TypeError, match="logits: dtype"):
        specdec.softmax(P[0].astype(dtype))


def test_mixed_dtypes_are_refused():
    with pytest.raises(TypeError, match="draft_probs: must have target_probs' dtype"):
        verify(q=Q.astype(np.float64))


def test_non_contiguous_rows_are_refused():
    wide = np.full((2, 3, 16), 1 / 8, np.float32)
    with pytest.raises(TypeError, match="draft_probs: must be C-contiguous"):
        verify(q=wide[:, :, ::2])
    with pytest.raises(TypeError, match="target_probs: must be C-contiguous"):
        verify(p=np.asfortranarray(P))
    with pytest.raises(TypeError, match="logits: must be C-contiguous"):
        specdec.sample_logits(np.ones((4, 6))[:, ::2], seeds=0, request_ids=np.arange(4), steps=0)


def test_lists_are_refused():
    with pytest.raises(TypeError, match="draft_probs: must be an array"):
        verify(q=Q.tolist())
    with pytest.raises(TypeError, match="logits: must be an array"):
        specdec.softmax([0.0, 1.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernels_read_an_input_at_its_own_address(dtype):
    # _core._data_address imports an array as every row argument of the extension does and returns the
    # address the kernels would read: the array's own memory, for owned arrays, C-contiguous views at an
    # offset, read-only arrays and borrowed buffers alike.
    big = np.arange(4 * 5 * 8, dtype=dtype).reshape(4, 5, 8)
    ro = big.copy()
    ro.setflags(write=False)
    for a in (big, big[1:3], big[2, 1:], ro, np.frombuffer(big.tobytes(), dtype=dtype)):
        assert specdec._core._data_address(a) == a.__array_interface__["data"][0]


def test_inputs_are_read_in_place_not_copied():
    # Read-only and non-owning views are accepted as they are (a copy would not need them to be).
    ro = P.copy()
    ro.setflags(write=False)
    view = np.frombuffer(Q.tobytes(), dtype=np.float32).reshape(Q.shape)  # read-only, borrowed memory
    assert verify(q=view, p=ro).tokens.shape == (2, 4)


def test_shape_errors_are_value_errors_naming_the_argument():
    with pytest.raises(ValueError, match="target_probs: expected shape"):
        verify(p=P[:, :3])
    with pytest.raises(ValueError, match="draft_probs: expected shape"):
        verify(q=Q[:, :, :4].copy())
    with pytest.raises(ValueError, match="num_drafts: values must lie in"):
        verify(num_drafts=[1, 4])
    with pytest.raises(ValueError, match="request_ids: expected shape"):
        verify(request_ids=[0])
    with pytest.raises(ValueError, match="seeds: values must lie in"):
        verify(seeds=-1)
    with pytest.raises(ValueError, match="num_drafts: must sum to"):
        specdec.verify(specdec.Strict(), D.ravel(), Q.reshape(6, 8), P[:, :4].reshape(8, 8), num_drafts=[2, 3], **KW)
    with pytest.raises(ValueError, match="num_drafts: required"):
        specdec.verify(specdec.Strict(), D.ravel(), Q.reshape(6, 8), P[:, :4].reshape(8, 8), **KW)
    with pytest.raises(ValueError, match="draft_tokens: expected 2-D"):
        verify(drafts=D[None])
    with pytest.raises(ValueError, match="draft_probs: Strict"):
        verify(q=None)
    with pytest.raises(ValueError, match="backend"):
        verify(backend="cuda")
    with pytest.raises(ValueError, match="q_at_drafts: expected"):
        specdec.verify_from_logits(specdec.Strict(), D, P, draft_logits=Q, q_at_drafts=np.ones(6, np.float32), **KW)


def test_token_ids_beyond_int32_are_value_errors_and_ids_outside_the_vocabulary_are_flagged():
    with pytest.raises(ValueError, match="draft_tokens: ids must fit in int32"):
        verify(drafts=np.full((2, 3), 2**40))
    r = verify(drafts=np.array([[0, 0, 0], [0, 8, 0]]))
    assert r.status.tolist() == [0, specdec.Status.BAD_DRAFT_TOKEN]
    assert r.tokens[1].tolist() == [-1] * 4  # the request emits nothing


def test_parameter_domains():
    with pytest.raises(ValueError, match="lenience"):
        specdec.Lenient(0.0)
    with pytest.raises(ValueError, match="epsilon"):
        specdec.Typical(epsilon=-1.0)
    with pytest.raises(TypeError, match="rule"):
        specdec.verify("strict", D, Q, P, **KW)
    with pytest.raises(ValueError, match="top_p must be in"):  # specdec's own message (specdec.Error)
        specdec.sample_logits(P[0], top_p=0.0, seeds=0, request_ids=np.arange(4), steps=0)
    with pytest.raises(specdec.Error, match="temperature must be finite"):
        specdec.warp_logits(P[0], temperature=np.nan)
    assert issubclass(specdec.Error, ValueError)


def test_two_threads_verify_concurrently_with_the_results_of_one():
    rng = np.random.default_rng(0)
    B, n, V = 64, 4, 4000
    q = rng.random((B, n, V), dtype=np.float32)
    q /= q.sum(axis=2, keepdims=True)
    p = rng.random((B, n + 1, V), dtype=np.float32)
    p /= p.sum(axis=2, keepdims=True)
    drafts = rng.integers(0, V, (B, n))
    kw = dict(seeds=3, request_ids=np.arange(B), steps=0)
    expected = specdec.verify(specdec.Block(), drafts, q, p, **kw).tokens
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(specdec.verify(specdec.Block(), drafts, q, p, **kw).tokens)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 10
    for r in results:
        np.testing.assert_array_equal(r, expected)


def test_the_gil_is_released_during_a_kernel():
    # While a long softmax runs in a thread, this thread keeps running: the longest pause between its
    # iterations is far shorter than the call (a call holding the GIL would stall it throughout).
    x = np.random.default_rng(1).standard_normal((1500, 20000)).astype(np.float32)
    start = time.perf_counter()
    specdec.softmax(x, backend="seq")
    alone = time.perf_counter() - start
    if alone < 0.1:
        pytest.skip(f"the call took {alone * 1e3:.0f} ms, too short to tell")
    done = threading.Event()

    def work():
        specdec.softmax(x, backend="seq")
        done.set()

    t = threading.Thread(target=work)
    last, longest = time.perf_counter(), 0.0
    t.start()
    while not done.is_set():  # every pause of this loop is a time this thread could not run
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    longest = max(longest, time.perf_counter() - last)
    t.join()
    assert longest < alone / 2, f"paused {longest * 1e3:.0f} ms during a {alone * 1e3:.0f} ms call"


def test_the_package_ships_its_type_information():
    import pathlib

    here = pathlib.Path(specdec.__file__).parent
    assert (here / "py.typed").is_file()
    stub = here / "_core.pyi"
    if not stub.is_file():
        pytest.skip("built with SPECDEC_PYTHON_STUBS=OFF: no _core.pyi")
    text = stub.read_text()
    for name in ("def verify(", "def verify_tree(", "def theory_sd_expected_tokens(", "class Error(ValueError)"):
        assert name in text, name

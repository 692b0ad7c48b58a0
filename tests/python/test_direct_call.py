"""specdec.verify's direct call (_core.verify_direct): arguments already in final form go straight to
the extension, anything else is declined (None) and takes the checked path; both give the same results."""

import numpy as np
import pytest

import specdec
from specdec import _core
from conftest import random_rows, sample_from

RULES = [specdec.Strict(), specdec.Lenient(0.5), specdec.Greedy(), specdec.SampleAndMatch(), specdec.Block(),
         specdec.Typical()]


def padded(rng, B=6, n=3, V=7, dtype=np.float32):
    q = random_rows(rng, (B, n, V), dtype, zeros=0.2)
    p = random_rows(rng, (B, n + 1, V), dtype, zeros=0.2)
    drafts = sample_from(rng, q).astype(np.int32)
    return dict(draft_tokens=drafts, draft_probs=q, target_probs=p, num_drafts=rng.integers(0, n + 1, B).astype(np.int32),
                seeds=rng.integers(0, 2**63, B).astype(np.uint64), request_ids=np.arange(B, dtype=np.uint32) * 7,
                steps=np.full(B, 3, np.uint32), output_positions=None)


def to_packed(a):
    nd, B = a["num_drafts"], len(a["num_drafts"])
    return dict(a, draft_tokens=np.concatenate([a["draft_tokens"][b, :nd[b]] for b in range(B)]),
                draft_probs=np.concatenate([a["draft_probs"][b, :nd[b]] for b in range(B)]),
                target_probs=np.concatenate([a["target_probs"][b, :nd[b] + 1] for b in range(B)]))


def direct(rule, a, backend=None, check_normalisation=False, normalisation_tolerance=1e-3, out=None):
    return _core.verify_direct(rule._direct_spec, backend or specdec.DEFAULT_BACKEND, a["draft_tokens"],
                               a["draft_probs"], a["target_probs"], a["seeds"], a["request_ids"], a["steps"],
                               a["num_drafts"], a["output_positions"], check_normalisation, normalisation_tolerance,
                               out)


def checked(rule, a, **kw):
    """The checked path: seeds and request ids as Python lists, which the direct call declines."""
    args = {k: v for k, v in a.items() if k not in ("draft_tokens", "draft_probs", "target_probs")}
    args.update(seeds=a["seeds"].tolist(), request_ids=a["request_ids"].tolist())
    return specdec.verify(rule, a["draft_tokens"], a["draft_probs"], a["target_probs"], **args, **kw)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("layout", ["padded", "packed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_direct_call_gives_the_checked_paths_results(backend, rule, layout, dtype):
    rng = np.random.default_rng(5)
    a = padded(rng, dtype=dtype)
    a = to_packed(a) if layout == "packed" else a
    for positions in (None, np.arange(6, dtype=np.uint32) + 40, 9):
        a["output_positions"] = positions
        got = direct(rule, a, backend)
        assert got is not None, "typed arrays in final form must be taken directly"
        want = checked(rule, a, backend=backend)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        for g, w in zip(specdec.verify(rule, a["draft_tokens"], a["draft_probs"], a["target_probs"], backend=backend,
                                       **{k: v for k, v in a.items() if k not in ("draft_tokens", "draft_probs",
                                                                                  "target_probs")}), want):
            np.testing.assert_array_equal(g, w)


def test_scalars_are_taken_where_one_number_stands_for_every_request():
    a = padded(np.random.default_rng(6))
    a.update(seeds=11, steps=2, num_drafts=2, output_positions=5)
    got = direct(specdec.Strict(), a)
    assert got is not None
    want = specdec.verify(specdec.Strict(), a["draft_tokens"], a["draft_probs"], a["target_probs"], seeds=[11] * 6,
                          request_ids=a["request_ids"].tolist(), steps=[2] * 6, num_drafts=[2] * 6,
                          output_positions=[5] * 6)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_the_callers_out_arrays_are_written_by_the_direct_call():
    a = padded(np.random.default_rng(7))
    out = (np.full((6, 4), 9, np.int32), np.full(6, 9, np.int32), np.full(6, 9, np.uint8))
    got = direct(specdec.Strict(), a, out=out)
    assert got is out
    r = specdec.verify(specdec.Strict(), a["draft_tokens"], a["draft_probs"], a["target_probs"], out=out,
                       **{k: v for k, v in a.items() if k not in ("draft_tokens", "draft_probs", "target_probs")})
    assert all(x is y for x, y in zip(r, out))
    for g, w in zip(out, checked(specdec.Strict(), a)):
        np.testing.assert_array_equal(g, w)


def _read_only(x):
    x = x.copy()
    x.setflags(write=False)
    return x


def _declined():
    """Arguments the direct call must decline (the checked path converts them or raises naming them)."""
    good_out = lambda: (np.zeros((6, 4), np.int32), np.zeros(6, np.int32), np.zeros(6, np.uint8))  # noqa: E731
    return {
        "int64 tokens": dict(draft_tokens=lambda a: a["draft_tokens"].astype(np.int64)),
        "non-contiguous tokens": dict(draft_tokens=lambda a: np.repeat(a["draft_tokens"], 2, axis=1)[:, ::2]),
        "float16 target": dict(target_probs=lambda a: a["target_probs"].astype(np.float16)),
        "mixed row dtypes": dict(draft_probs=lambda a: a["draft_probs"].astype(np.float64)),
        "no q for Strict": dict(draft_probs=lambda a: None),
        "a target row short": dict(target_probs=lambda a: a["target_probs"][:, :3].copy()),
        "num_drafts above n": dict(num_drafts=lambda a: np.full(6, 4, np.int32)),
        "negative num_drafts": dict(num_drafts=lambda a: np.full(6, -1, np.int32)),
        "int64 num_drafts": dict(num_drafts=lambda a: a["num_drafts"].astype(np.int64)),
        "seeds as a list": dict(seeds=lambda a: a["seeds"].tolist()),
        "negative seed": dict(seeds=lambda a: -1),
        "one request id for six": dict(request_ids=lambda a: 3),
        "int64 steps": dict(steps=lambda a: a["steps"].astype(np.int64)),
        "the round-keyed marker as a position": dict(output_positions=lambda a: 2**32 - 1),
        "a bool for num_drafts": dict(num_drafts=lambda a: True),
        "read-only out": dict(out=lambda a: good_out()[:2] + (_read_only(np.zeros(6, np.uint8)),)),
        "out of the wrong width": dict(out=lambda a: (np.zeros((6, 5), np.int32),) + good_out()[1:]),
        "out as a list": dict(out=lambda a: list(good_out())),
        "unknown backend": dict(backend=lambda a: "cuda"),
        "int check_normalisation": dict(check_normalisation=lambda a: 1),
        "int tolerance": dict(normalisation_tolerance=lambda a: 1),
    }


@pytest.mark.parametrize("case", list(_declined()))
def test_the_direct_call_declines_what_is_not_in_final_form(case):
    a = padded(np.random.default_rng(8))
    kw = {}
    for name, make in _declined()[case].items():
        if name in a:
            a[name] = make(a)
        else:
            kw[name] = make(a)
    assert direct(specdec.Strict(), a, **kw) is None


def test_a_declined_read_only_out_is_refused_by_the_checked_path_and_left_unwritten():
    a = padded(np.random.default_rng(9))
    status = _read_only(np.full(6, 5, np.uint8))
    with pytest.raises(TypeError, match="out.status: must be C-contiguous and writable"):
        specdec.verify(specdec.Strict(), a["draft_tokens"], a["draft_probs"], a["target_probs"],
                       out=(np.zeros((6, 4), np.int32), np.zeros(6, np.int32), status),
                       **{k: v for k, v in a.items() if k not in ("draft_tokens", "draft_probs", "target_probs")})
    assert status.tolist() == [5] * 6


def test_packed_counts_that_do_not_sum_to_the_drafts_are_declined_and_named():
    a = to_packed(padded(np.random.default_rng(10)))
    a["num_drafts"] = a["num_drafts"] + np.int32(1)
    assert direct(specdec.Strict(), a) is None
    with pytest.raises(ValueError, match="num_drafts: must sum to"):
        checked(specdec.Strict(), a)


# ---- specdec.verify_from_logits's direct call (_core.verify_from_logits_direct) --------------------

def from_logits(rng, B=6, n=3, V=7, dtype=np.float32, layout="padded"):
    a = padded(rng, B, n, V, dtype)
    a = to_packed(a) if layout == "packed" else a
    logits = lambda shape: rng.normal(0, 2, shape).astype(dtype)  # noqa: E731
    return dict(draft_tokens=a["draft_tokens"], target_logits=logits(a["target_probs"].shape), seeds=a["seeds"],
                request_ids=a["request_ids"], steps=a["steps"], draft_logits=logits(a["draft_probs"].shape),
                draft_probs=None, q_at_drafts=None, num_drafts=a["num_drafts"], output_positions=None,
                temperature=0.8, top_k=0, top_p=1.0, min_p=0.0, draft_temperature=None, draft_top_k=None,
                draft_top_p=None, draft_min_p=None)


def direct_from_logits(rule, a, backend=None, out=None):
    return _core.verify_from_logits_direct(rule._direct_spec, backend or specdec.DEFAULT_BACKEND, *a.values(), out)


def checked_from_logits(rule, a, **kw):
    """The checked path: seeds as a Python list, which the direct call declines."""
    args = {k: v for k, v in a.items() if k not in ("draft_tokens", "target_logits")}
    args.update(seeds=a["seeds"].tolist())
    return specdec.verify_from_logits(rule, a["draft_tokens"], a["target_logits"], **args, **kw)


def _draft_sides(a, rng):
    """Each draft side verify_from_logits takes, with the warp parameters it goes with."""
    B = len(a["seeds"])
    q = specdec.softmax(a["draft_logits"].reshape(-1, a["draft_logits"].shape[-1])).reshape(a["draft_logits"].shape)
    q_at = np.take_along_axis(q, a["draft_tokens"][..., None].astype(np.int64), -1)[..., 0]
    per_request = dict(temperature=rng.uniform(0.3, 1.5, B), top_k=rng.integers(0, 5, B).astype(np.int32),
                       top_p=rng.uniform(0.5, 1.0, B), min_p=np.full(B, 0.05))
    return {
        "draft logits, scalar warp": {},
        "draft logits, per-request warp": per_request,
        "draft logits, own warp": dict(draft_temperature=0.5, draft_top_k=3),
        "draft probs": dict(draft_logits=None, draft_probs=q),
        "draft probs and q at drafts": dict(draft_logits=None, draft_probs=q, q_at_drafts=np.ascontiguousarray(q_at)),
        "no draft side": dict(draft_logits=None),
    }


@pytest.mark.parametrize("rule", RULES, ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("layout", ["padded", "packed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_from_logits_direct_call_gives_the_checked_paths_results(backend, rule, layout, dtype):
    rng = np.random.default_rng(11)
    base = from_logits(rng, dtype=dtype, layout=layout)
    for side, changes in _draft_sides(base, rng).items():
        a = dict(base, **changes)
        if a["draft_logits"] is None and a["draft_probs"] is None and rule.reads_q:
            assert direct_from_logits(rule, a, backend) is None, side
            continue
        for positions in (None, 9):
            a["output_positions"] = positions
            got = direct_from_logits(rule, a, backend)
            assert got is not None, f"{side}: arguments in final form must be taken directly"
            want = checked_from_logits(rule, a, backend=backend)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w, err_msg=side)
            public = specdec.verify_from_logits(rule, a["draft_tokens"], a["target_logits"], backend=backend,
                                                **{k: v for k, v in a.items() if k not in ("draft_tokens", "target_logits")})
            for g, w in zip(public, want):
                np.testing.assert_array_equal(g, w, err_msg=side)


def test_the_from_logits_direct_call_writes_the_callers_out_arrays():
    a = from_logits(np.random.default_rng(12))
    out = (np.full((6, 4), 9, np.int32), np.full(6, 9, np.int32), np.full(6, 9, np.uint8))
    assert direct_from_logits(specdec.Strict(), a, out=out) is out
    for g, w in zip(out, checked_from_logits(specdec.Strict(), a)):
        np.testing.assert_array_equal(g, w)


def _declined_from_logits():
    """verify_from_logits arguments the direct call must decline."""
    B = 6
    return {
        "both draft logits and probs": dict(draft_probs=lambda a: a["draft_logits"]),
        "draft warp with draft probs": dict(draft_probs=lambda a: a["draft_logits"], draft_logits=lambda a: None,
                                            draft_temperature=lambda a: 0.5),
        "temperature as a list": dict(temperature=lambda a: [0.5] * B),
        "float32 temperatures": dict(temperature=lambda a: np.full(B, 0.5, np.float32)),
        "negative temperature": dict(temperature=lambda a: -1.0),
        "nan temperature": dict(temperature=lambda a: float("nan")),
        "a bool temperature": dict(temperature=lambda a: True),
        "a huge int temperature": dict(temperature=lambda a: 10**400),
        "float top_k": dict(top_k=lambda a: 2.0),
        "int64 top_k": dict(top_k=lambda a: np.full(B, 2, np.int64)),
        "top_k above int32": dict(top_k=lambda a: 2**31),
        "top_p of 0": dict(top_p=lambda a: 0.0),
        "min_p above 1": dict(min_p=lambda a: 1.5),
        "draft top_p of 0": dict(draft_top_p=lambda a: 0.0),
        "temperature None": dict(temperature=lambda a: None),
        "q at drafts transposed": dict(q_at_drafts=lambda a: np.ones((3, B), np.float32)),
        "q at drafts in float64": dict(q_at_drafts=lambda a: np.ones((B, 3), np.float64)),
        "no q for Strict": dict(draft_logits=lambda a: None),
        "int64 tokens": dict(draft_tokens=lambda a: a["draft_tokens"].astype(np.int64)),
        "seeds as a list": dict(seeds=lambda a: a["seeds"].tolist()),
    }


@pytest.mark.parametrize("case", list(_declined_from_logits()))
def test_the_from_logits_direct_call_declines_what_is_not_in_final_form(case):
    a = from_logits(np.random.default_rng(13))
    for name, make in _declined_from_logits()[case].items():
        a[name] = make(a)
    assert direct_from_logits(specdec.Strict(), a) is None


@pytest.mark.parametrize("arg,value,match", [("temperature", -1.0, "temperature must be finite and >= 0"),
                                             ("top_p", 0.0, "top_p must be in"),
                                             ("draft_top_p", 0.0, "top_p must be in"),
                                             ("temperature", [0.5] * 5, r"temperature: expected a scalar or shape \(6,\)")])
def test_declined_warp_parameters_are_named_by_the_checked_path(arg, value, match):
    a = from_logits(np.random.default_rng(14))
    a[arg] = value
    with pytest.raises(ValueError, match=match):
        specdec.verify_from_logits(specdec.Strict(), a["draft_tokens"], a["target_logits"],
                                   **{k: v for k, v in a.items() if k not in ("draft_tokens", "target_logits")})


# ---- specdec.sample's and specdec.sample_logits's direct calls --------------------------------------

def rows_call(rng, R=5, V=9, dtype=np.float32):
    return dict(rows=random_rows(rng, (R, V), dtype, zeros=0.2), seeds=rng.integers(0, 2**63, R).astype(np.uint64),
                request_ids=np.arange(R, dtype=np.uint32) * 3, steps=np.full(R, 2, np.uint32))


def checked_sample(a, logits=False, **kw):
    """The checked path: seeds as a Python list, which the direct calls decline."""
    call = specdec.sample_logits if logits else specdec.sample
    return call(a["rows"], seeds=a["seeds"].tolist(), request_ids=a["request_ids"], steps=a["steps"], **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_sampling_direct_calls_give_the_checked_paths_results(backend, dtype):
    rng = np.random.default_rng(15)
    a = rows_call(rng, dtype=dtype)
    logits = dict(a, rows=np.log(a["rows"] + dtype(1e-3)).astype(dtype))
    R = len(a["seeds"])
    for position, purpose in ((0, specdec.Purpose.TARGET_SAMPLE), (7, specdec.Purpose.DRAFT), (2**32 - 1, 3)):
        got = _core.sample_direct(backend, a["rows"], a["seeds"], a["request_ids"], a["steps"], position, purpose)
        assert got is not None
        want = checked_sample(a, position=position, purpose=purpose, backend=backend)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        for warp in (dict(temperature=0.7, top_k=0, top_p=1.0, min_p=0.0),
                     dict(temperature=rng.uniform(0.2, 2, R), top_k=rng.integers(0, 4, R).astype(np.int32),
                          top_p=rng.uniform(0.5, 1, R), min_p=np.full(R, 0.02))):
            got = _core.sample_logits_direct(backend, logits["rows"], a["seeds"], a["request_ids"], a["steps"],
                                             *warp.values(), position, purpose)
            assert got is not None
            want = checked_sample(logits, logits=True, position=position, purpose=purpose, backend=backend, **warp)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    scalars = specdec.sample(a["rows"], seeds=5, request_ids=a["request_ids"], steps=1, backend=backend)
    want = specdec.sample(a["rows"], seeds=[5] * R, request_ids=a["request_ids"].tolist(), steps=[1] * R, backend=backend)
    for g, w in zip(scalars, want):
        np.testing.assert_array_equal(g, w)


def _declined_sampling():
    R = 5
    return {
        "int64 seeds": dict(seeds=lambda a: a["seeds"].astype(np.int64)),
        "one request id for five": dict(request_ids=lambda a: 3),
        "1-D rows": dict(rows=lambda a: a["rows"][0].copy()),
        "non-contiguous rows": dict(rows=lambda a: np.repeat(a["rows"], 2, axis=1)[:, ::2]),
        "float16 rows": dict(rows=lambda a: a["rows"].astype(np.float16)),
        "a list of rows": dict(rows=lambda a: a["rows"].tolist()),
        "float position": dict(position=lambda a: 1.0),
        "negative position": dict(position=lambda a: -1),
        "position 2**32": dict(position=lambda a: 2**32),
        "bool position": dict(position=lambda a: True),
        "purpose 256": dict(purpose=lambda a: 256),
        "float purpose": dict(purpose=lambda a: 1.0),
        "steps of the wrong length": dict(steps=lambda a: np.zeros(R + 1, np.uint32)),
        "unknown backend": dict(backend=lambda a: "cuda"),
    }


@pytest.mark.parametrize("case", list(_declined_sampling()))
def test_the_sampling_direct_calls_decline_what_is_not_in_final_form(case):
    a = dict(rows_call(np.random.default_rng(16)), backend=specdec.DEFAULT_BACKEND, position=0, purpose=0)
    for name, make in _declined_sampling()[case].items():
        a[name] = make(a)
    args = (a["rows"], a["seeds"], a["request_ids"], a["steps"])
    assert _core.sample_direct(a["backend"], *args, a["position"], a["purpose"]) is None
    assert _core.sample_logits_direct(a["backend"], *args, 1.0, 0, 1.0, 0.0, a["position"], a["purpose"]) is None


@pytest.mark.parametrize("warp", [dict(temperature=[0.5] * 5), dict(temperature=-1.0), dict(top_k=2.0),
                                  dict(top_p=0.0), dict(min_p=np.full(5, 0.1, np.float32))])
def test_the_sample_logits_direct_call_declines_warp_parameters_not_in_final_form(warp):
    a = rows_call(np.random.default_rng(17))
    w = dict(dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0), **warp)
    assert _core.sample_logits_direct(specdec.DEFAULT_BACKEND, a["rows"], a["seeds"], a["request_ids"], a["steps"],
                                      *w.values(), 0, 0) is None


def test_declined_sampling_arguments_are_named_by_the_checked_path():
    a = rows_call(np.random.default_rng(18))
    kw = dict(seeds=a["seeds"], request_ids=a["request_ids"], steps=a["steps"])
    with pytest.raises(ValueError, match="position: must lie in"):
        specdec.sample(a["rows"], position=-1, **kw)
    with pytest.raises(ValueError, match="purpose: must lie in"):
        specdec.sample_logits(a["rows"], purpose=256, **kw)
    with pytest.raises(ValueError, match="probs: expected shape"):
        specdec.sample(a["rows"][0].copy(), **kw)

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

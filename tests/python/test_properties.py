"""Property tests (hypothesis) of verify on random shapes, layouts, rules, masks, NaN rows and ids:
every token is in [0, V) or -1, the emitted prefix is the accepted drafts, errors emit no correction,
seq equals simd, and a request alone equals the request in its batch."""

import numpy as np
import pytest

import specdec

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (pip install hypothesis)")
from hypothesis import given, settings, strategies as st  # noqa: E402

RULES = [specdec.Strict(), specdec.Lenient(0.5), specdec.Lenient(2.0), specdec.Greedy(), specdec.SampleAndMatch(),
         specdec.Block(), specdec.Typical(), specdec.Typical(correction="typical_sample")]


@st.composite
def chain_batches(draw):
    B = draw(st.integers(0, 6))
    n = draw(st.integers(0, 5))
    V = draw(st.integers(1, 40))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    zero_rate = draw(st.sampled_from([0.0, 0.5, 0.95]))

    def rows(shape):
        x = rng.random(shape)
        x[rng.random(shape) < zero_rate] = 0.0
        sums = x.sum(axis=-1, keepdims=True)
        return np.where(sums > 0, x / np.where(sums > 0, sums, 1), x).astype(dtype)  # all-zero rows stay

    q, p = rows((B, n, V)), rows((B, n + 1, V))
    if B and draw(st.booleans()):  # a NaN somewhere
        p[tuple(rng.integers(0, s) for s in p.shape)] = np.nan
    drafts = rng.integers(-1, V + 1, (B, n)) if draw(st.booleans()) else rng.integers(0, V, (B, n))
    nd = rng.integers(0, n + 1, B)
    packed = draw(st.booleans())
    return dict(B=B, n=n, V=V, q=q, p=p, drafts=drafts, nd=nd, packed=packed, seeds=rng.integers(0, 2**63, B),
                ids=rng.permutation(max(B, 1) * 10)[:B], steps=rng.integers(0, 2**32 - 1, B))


def call(rule, c, backend, rows=None):
    rows = range(c["B"]) if rows is None else rows
    rows = list(rows)
    nd = c["nd"][rows]
    if c["packed"]:
        drafts = np.concatenate([c["drafts"][b, :c["nd"][b]] for b in rows] or [np.zeros(0, np.int64)])
        q = np.concatenate([c["q"][b, :c["nd"][b]] for b in rows] or [np.zeros((0, c["V"]), c["q"].dtype)])
        p = np.concatenate([c["p"][b, :c["nd"][b] + 1] for b in rows] or [np.zeros((0, c["V"]), c["p"].dtype)])
    else:
        drafts, q, p = c["drafts"][rows], c["q"][rows], c["p"][rows]
    return specdec.verify(rule, drafts, q if rule.reads_q else None, p, num_drafts=nd, seeds=c["seeds"][rows],
                          request_ids=c["ids"][rows], steps=c["steps"][rows], backend=backend)


@settings(max_examples=150, deadline=None)
@given(chain_batches(), st.sampled_from(RULES))
def test_verify_invariants(c, rule):
    results = {b: call(rule, c, b) for b in specdec.BACKENDS}
    r = results["seq"]
    for other in results.values():
        for x, y in zip(r, other):
            np.testing.assert_array_equal(x, y)
    V = c["V"]
    width = (c["nd"].max() if c["B"] else 0) if c["packed"] else c["n"]
    assert r.tokens.shape == (c["B"], width + 1)
    assert ((r.tokens == -1) | ((r.tokens >= 0) & (r.tokens < V))).all()
    for b in range(c["B"]):
        k = int(r.num_accepted[b])
        assert 0 <= k <= c["nd"][b]
        assert r.tokens[b, :k].tolist() == c["drafts"][b, :k].tolist()
        assert (r.tokens[b, k + 1:] == -1).all()
        if specdec.is_valid(r.status[b]):
            assert 0 <= r.tokens[b, k] < V
        else:
            assert r.tokens[b, k] == -1  # an error emits no correction token
        if r.status[b] & specdec.Status.BAD_DRAFT_TOKEN:
            assert (r.tokens[b] == -1).all()
    if c["B"]:
        b = c["B"] - 1
        alone = call(rule, c, specdec.DEFAULT_BACKEND, rows=[b])
        assert alone.tokens[0].tolist() == r.tokens[b, :alone.tokens.shape[1]].tolist()
        assert alone.status[0] == r.status[b]

"""Property tests (hypothesis) of verify and verify_tree on random shapes, layouts, trees, rules, masks,
NaN rows and ids: every token is in [0, V) or -1, the emitted prefix is the accepted drafts (for trees:
the tokens of a root-to-node path), errors emit no correction, seq equals simd, and a request alone
equals the request in its batch."""

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


def layout(c, rows):
    """The drafts, q and p of requests `rows`, padded or packed as the case says."""
    nd = c["nd"]
    if not c["packed"]:
        return c["drafts"][rows], c["q"][rows], c["p"][rows]
    empty = np.zeros((0, c["V"]), c["q"].dtype)
    return (np.concatenate([c["drafts"][b, :nd[b]] for b in rows] or [np.zeros(0, np.int64)]),
            np.concatenate([c["q"][b, :nd[b]] for b in rows] or [empty]),
            np.concatenate([c["p"][b, :nd[b] + 1] for b in rows] or [empty]))


def call(rule, c, backend, rows=None):
    rows = list(range(c["B"]) if rows is None else rows)
    drafts, q, p = layout(c, rows)
    return specdec.verify(rule, drafts, q if rule.reads_q else None, p, num_drafts=c["nd"][rows], seeds=c["seeds"][rows],
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


@st.composite
def logit_rows(draw):
    R = draw(st.integers(0, 8))
    V = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = (rng.standard_normal((R, V)) * draw(st.sampled_from([0.1, 1.0, 10.0]))).astype(
        draw(st.sampled_from([np.float32, np.float64])))
    x[rng.random((R, V)) < draw(st.sampled_from([0.0, 0.5, 1.0]))] = -np.inf  # masked tokens, maybe whole rows
    if R and draw(st.booleans()):
        x[rng.integers(0, R), rng.integers(0, V)] = np.nan
    warp = dict(temperature=np.where(rng.random(R) < 0.2, 0.0, rng.uniform(0.1, 3.0, R)), top_k=rng.integers(0, V + 2, R),
                top_p=rng.uniform(0.01, 1.0, R), min_p=np.where(rng.random(R) < 0.5, 0.0, rng.uniform(0, 1, R)))
    ids = dict(seeds=rng.integers(0, 2**63, R), request_ids=rng.permutation(max(R, 1) * 5)[:R], steps=rng.integers(0, 9, R))
    return x, warp, ids


@settings(max_examples=150, deadline=None)
@given(logit_rows())
def test_sample_logits_invariants(case):
    x, warp, ids = case
    R, V = x.shape
    results = [specdec.sample_logits(x, backend=b, **warp, **ids) for b in specdec.BACKENDS]
    for other in results[1:]:
        np.testing.assert_array_equal(results[0].tokens, other.tokens)
        np.testing.assert_array_equal(results[0].status, other.status)
    s = results[0]
    for r in range(R):
        if s.status[r] == specdec.RowStatus.OK:
            assert 0 <= s.tokens[r] < V and np.isfinite(x[r, s.tokens[r]])  # never a masked token
        else:
            assert s.tokens[r] == -1
            assert np.isnan(x[r]).any() or np.isposinf(x[r]).any() or np.isneginf(x[r]).all()
        if R:
            alone = specdec.sample_logits(x[r:r + 1], **{k: v[r:r + 1] for k, v in warp.items()},
                                          **{k: v[r:r + 1] for k, v in ids.items()})
            assert alone.tokens[0] == s.tokens[r] and alone.status[0] == s.status[r]


@settings(max_examples=100, deadline=None)
@given(chain_batches(), st.sampled_from([specdec.Strict(), specdec.Greedy(), specdec.SampleAndMatch(), specdec.Block()]),
       st.sampled_from([0.0, 0.7, 1.0]), st.integers(0, 5))
def test_verify_from_logits_invariants(c, rule, temperature, top_k):
    with np.errstate(divide="ignore", invalid="ignore"):
        c = dict(c, q=np.log(c["q"]), p=np.log(c["p"]))  # zero probabilities become -inf logits
    out = {}
    drafts, q, p = layout(c, list(range(c["B"])))
    nd = c["nd"]
    for b in specdec.BACKENDS:
        out[b] = specdec.verify_from_logits(rule, drafts, p, draft_logits=q, num_drafts=nd, seeds=c["seeds"],
                                            request_ids=c["ids"], steps=c["steps"], temperature=temperature,
                                            top_k=top_k, backend=b)
    r = out["seq"]
    for other in out.values():
        for x, y in zip(r, other):
            np.testing.assert_array_equal(x, y)
    for b in range(c["B"]):
        k = int(r.num_accepted[b])
        assert r.tokens[b, :k].tolist() == c["drafts"][b, :k].tolist()
        assert ((r.tokens[b] == -1) | ((r.tokens[b] >= 0) & (r.tokens[b] < c["V"]))).all()
        assert (r.tokens[b, k + 1:] == -1).all()
        assert (r.tokens[b, k] >= 0) == bool(specdec.is_valid(r.status[b]))


TREE_RULES = [specdec.Strict(), specdec.RecursiveRejection(), specdec.KSeq(), specdec.TargetOnly(), specdec.Greedy(),
              specdec.SampleAndMatch(), specdec.Typical()]


@st.composite
def tree_batches(draw):
    B = draw(st.integers(0, 5))
    V = draw(st.integers(1, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    num_nodes = rng.integers(1, 12, B)
    parents = np.concatenate([[-1] + [int(rng.integers(0, i)) for i in range(1, n)] for n in num_nodes] or [[]])
    N = int(num_nodes.sum())
    zero_rate = draw(st.sampled_from([0.0, 0.5, 0.95]))

    def rows():
        x = rng.random((N, V))
        x[rng.random((N, V)) < zero_rate] = 0.0
        s = x.sum(axis=1, keepdims=True)
        return np.where(s > 0, x / np.where(s > 0, s, 1), x).astype(dtype)

    q, p = rows(), rows()
    if N and draw(st.booleans()):
        p[rng.integers(0, N), rng.integers(0, V)] = np.nan
    tokens = rng.integers(-1, V + 1, N) if draw(st.booleans()) else rng.integers(0, V, N)
    return dict(B=B, V=V, num_nodes=num_nodes, parents=parents.astype(np.int64), tokens=tokens, q=q, p=p,
                seeds=rng.integers(0, 2**63, B), ids=rng.permutation(max(B, 1) * 10)[:B], steps=rng.integers(0, 99, B))


@settings(max_examples=150, deadline=None)
@given(tree_batches(), st.sampled_from(TREE_RULES))
def test_verify_tree_invariants(c, rule):
    def run(rows, backend=specdec.DEFAULT_BACKEND):
        off = np.concatenate([[0], np.cumsum(c["num_nodes"])])
        pick = lambda a: np.concatenate([a[off[b]:off[b + 1]] for b in rows] or [a[:0]])  # noqa: E731
        return specdec.verify_tree(rule, pick(c["parents"]), pick(c["tokens"]), pick(c["q"]) if rule.reads_q else None,
                                   pick(c["p"]), num_nodes=c["num_nodes"][rows], seeds=c["seeds"][rows],
                                   request_ids=c["ids"][rows], steps=c["steps"][rows], backend=backend)

    everyone = list(range(c["B"]))
    results = [run(everyone, b) for b in specdec.BACKENDS]
    for other in results[1:]:
        for x, y in zip(results[0], other):
            np.testing.assert_array_equal(x, y)
    r, V = results[0], c["V"]
    off = np.concatenate([[0], np.cumsum(c["num_nodes"])])
    for b in everyone:
        k = int(r.num_accepted[b])
        path = r.path[b, :k + 1].tolist()
        assert (r.path[b, k + 1:] == -1).all() and (r.tokens[b, k + 1:] == -1).all()
        if k:  # the accepted path walks down from the root, and its tokens are the nodes' tokens
            assert path[0] == 0
            assert all(c["parents"][off[b] + child] == parent for parent, child in zip(path, path[1:]))
            assert r.tokens[b, :k].tolist() == [int(c["tokens"][off[b] + node]) for node in path[1:]]
        assert ((r.tokens[b] == -1) | ((r.tokens[b] >= 0) & (r.tokens[b] < V))).all()
        assert (r.tokens[b, k] >= 0) == bool(specdec.is_valid(r.status[b]))  # an error emits no correction
    if c["B"]:
        b = c["B"] - 1
        alone = run([b])
        assert alone.tokens[0].tolist() == r.tokens[b, :alone.tokens.shape[1]].tolist()
        assert alone.status[0] == r.status[b]

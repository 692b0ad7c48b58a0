"""specdec.verify: hand-computed cases, the accept test's uniforms, layouts, backends, flags."""

import numpy as np
import pytest

import specdec
from conftest import random_rows, sample_from

ACCEPT = specdec.Purpose.ACCEPT


def one(rule, drafts, q, p, seed=1, rid=0, step=0, backend=None):
    """Verifies one request given as plain lists (q [n][V], p [n + 1][V])."""
    q = None if q is None else np.asarray([q], dtype=np.float64)
    return specdec.verify(rule, np.asarray([drafts]), q, np.asarray([p], dtype=np.float64),
                          seeds=seed, request_ids=[rid], steps=step, backend=backend)


def test_strict_p_equal_q_accepts_everything_and_emits_the_one_hot_bonus(backend):
    # u q(x) < p(x) with u < 1 holds whenever p(x) = q(x) > 0; the bonus row is one-hot on 3.
    q = [[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]]
    p = q + [[0.0, 0.0, 0.0, 1.0]]
    for seed in range(20):
        r = one(specdec.Strict(), [2, 1], q, p, seed=seed, backend=backend)
        assert r.tokens.tolist() == [[2, 1, 3]]
        assert r.num_accepted.tolist() == [2]
        assert r.status.tolist() == [0]


def test_strict_p_of_draft_zero_rejects_and_samples_the_one_hot_residual(backend):
    # p(x) = 0 fails u q(x) < p(x) for every u; the residual max(0, p - q) is one-hot on token 2.
    q = [[0.0, 1.0, 0.0, 0.0]]
    p = [[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
    for seed in range(20):
        r = one(specdec.Strict(), [1], q, p, seed=seed, backend=backend)
        assert r.tokens.tolist() == [[2, -1]]
        assert r.num_accepted.tolist() == [0]
        assert r.status.tolist() == [specdec.Status.OK]


def test_greedy_accepts_while_the_draft_is_the_argmax():
    p = [[0.1, 0.6, 0.3], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6]]
    assert one(specdec.Greedy(), [1, 0], None, p).tokens.tolist() == [[1, 0, 2]]  # both accepted, bonus argmax
    assert one(specdec.Greedy(), [1, 2], None, p).tokens.tolist() == [[1, 0, -1]]  # second rejected: argmax 0
    assert one(specdec.Greedy(), [2, 0], None, p).tokens.tolist() == [[1, -1, -1]]
    # ties go to the lowest id
    assert one(specdec.Greedy(), [1], None, [[0.4, 0.4, 0.2], [1, 0, 0]]).tokens.tolist() == [[0, -1]]


def test_typical_threshold_by_hand():
    # p one-hot on 0: H = 0, threshold min(epsilon, delta) = 0.09; p(1) = 0 is rejected, argmax emitted.
    p = [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    assert one(specdec.Typical(), [1], None, p).tokens.tolist() == [[0, -1]]
    assert one(specdec.Typical(), [0], None, p).tokens.tolist() == [[0, 2]]
    # uniform p over 3: threshold min(0.09, 0.3 / 3) = 0.09 < 1/3: any draft is accepted
    u = [1 / 3] * 3
    assert one(specdec.Typical(), [2], None, [u, [0, 1.0, 0]]).tokens.tolist() == [[2, 1]]
    # epsilon above 1/3 rejects it
    assert one(specdec.Typical(epsilon=0.5, delta=10.0), [2], None, [u, [0, 1.0, 0]]).num_accepted.tolist() == [0]


def strict_accepted(drafts, q, p, seed, rid, step):
    """The number of drafts strict accepts, from the accept uniforms of the stream (the C++ rule:
    u q(x) < p(x) in double with u = uniform(seed, rid, step, i, ACCEPT); q(x) = 0 rejects)."""
    for i, x in enumerate(drafts):
        qx, px = float(q[i][x]), float(p[i][x])
        if qx == 0.0 or not specdec.uniform(seed, rid, step, i, ACCEPT) * qx < px:
            return i
    return len(drafts)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strict_accept_count_follows_the_addressed_uniforms(backend, dtype):
    rng = np.random.default_rng(3)
    B, n, V = 64, 5, 7
    q = random_rows(rng, (B, n, V), dtype)
    p = random_rows(rng, (B, n + 1, V), dtype)
    drafts = sample_from(rng, q)
    seeds = rng.integers(0, 2**63, B, dtype=np.uint64)
    rids = rng.permutation(10_000)[:B]
    steps = rng.integers(0, 100, B)
    r = specdec.verify(specdec.Strict(), drafts, q, p, seeds=seeds, request_ids=rids, steps=steps, backend=backend)
    for b in range(B):
        k = strict_accepted(drafts[b], q[b], p[b], int(seeds[b]), int(rids[b]), int(steps[b]))
        assert r.num_accepted[b] == k
        assert r.tokens[b, :k].tolist() == drafts[b, :k].tolist()
        assert 0 <= r.tokens[b, k] < V and (r.tokens[b, k + 1:] == -1).all()


RULES = [specdec.Strict(), specdec.Lenient(0.5), specdec.Lenient(2.0), specdec.Greedy(), specdec.SampleAndMatch(),
         specdec.Block(), specdec.Typical(), specdec.Typical(correction="typical_sample")]


def batch(rng, B=24, n=4, V=33, dtype=np.float32):
    q = random_rows(rng, (B, n, V), dtype, zeros=0.3)
    p = random_rows(rng, (B, n + 1, V), dtype, zeros=0.3)
    drafts = sample_from(rng, q)
    nd = rng.integers(0, n + 1, B)
    return drafts, q, p, nd


@pytest.mark.skipif(not specdec.HAS_SIMD, reason="this build has no simd backend (xsimd was not found)")
def test_output_positions_key_the_targets_samples_by_the_position_they_decide(backend):
    """With output_positions, sample-and-match's sample at chain position i is the target sample of
    stream (seed, id, step = output_position + i, position 0) whatever `steps` is; without, it moves
    with `steps` (control)."""
    rng = np.random.default_rng(4)
    B, n, V = 300, 3, 6
    p = rng.random((B, n + 1, V))
    p /= p.sum(-1, keepdims=True)
    drafts = rng.integers(0, V, (B, n)).astype(np.int32)
    outpos = rng.integers(0, 1000, B).astype(np.uint32)
    kw = dict(seeds=3, request_ids=np.arange(B), backend=backend)
    r0 = specdec.verify(specdec.SampleAndMatch(), drafts, None, p, steps=0, output_positions=outpos, **kw)
    r1 = specdec.verify(specdec.SampleAndMatch(), drafts, None, p, steps=77, output_positions=outpos, **kw)
    assert r0.tokens.tolist() == r1.tokens.tolist()
    for i in range(n + 1):  # the token each request emits at chain position i, drawn from its own address
        want = specdec.sample(np.ascontiguousarray(p[:, i]), steps=outpos + i, position=0, **kw).tokens
        reached = r0.num_accepted >= i
        assert np.array_equal(r0.tokens[reached, i], want[reached])
    by_round = [specdec.verify(specdec.SampleAndMatch(), drafts, None, p, steps=s, **kw).tokens for s in (0, 77)]
    assert (by_round[0] != by_round[1]).any()
    with pytest.raises(ValueError, match="output_positions"):
        specdec.verify(specdec.SampleAndMatch(), drafts, None, p, steps=0, output_positions=2**32 - 1, **kw)


@pytest.mark.parametrize("rule", RULES, ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_simd_gives_seq_tokens_bit_for_bit(rule, dtype):
    rng = np.random.default_rng(11)
    drafts, q, p, nd = batch(rng, B=48, V=300, dtype=dtype)
    p[3, 1, 5] = np.nan  # an invalid row
    drafts[5, 0] = 300  # an id outside [0, V)
    kw = dict(seeds=7, request_ids=np.arange(48), steps=3, num_drafts=nd)
    seq = specdec.verify(rule, drafts, q, p, backend="seq", **kw)
    simd = specdec.verify(rule, drafts, q, p, backend="simd", **kw)
    for a, b in zip(seq, simd):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_a_request_alone_equals_the_request_in_any_batch(backend, rule):
    rng = np.random.default_rng(5)
    drafts, q, p, nd = batch(rng)
    B = len(nd)
    seeds = rng.integers(0, 2**40, B)
    rids = rng.permutation(1000)[:B]
    steps = rng.integers(0, 9, B)
    full = specdec.verify(rule, drafts, q, p, seeds=seeds, request_ids=rids, steps=steps, num_drafts=nd, backend=backend)
    order = rng.permutation(B)
    shuffled = specdec.verify(rule, drafts[order], q[order], p[order], seeds=seeds[order], request_ids=rids[order],
                              steps=steps[order], num_drafts=nd[order], backend=backend)
    for field_full, field_shuf in zip(full, shuffled):
        np.testing.assert_array_equal(field_full[order], field_shuf)
    for b in (0, 7, B - 1):
        alone = specdec.verify(rule, drafts[b:b + 1], q[b:b + 1], p[b:b + 1], seeds=seeds[b], request_ids=[rids[b]],
                               steps=steps[b], num_drafts=nd[b:b + 1], backend=backend)
        assert alone.tokens.tolist() == full.tokens[b:b + 1].tolist()
        assert alone.num_accepted[0] == full.num_accepted[b] and alone.status[0] == full.status[b]


def test_other_requests_bad_rows_do_not_change_a_request():
    rng = np.random.default_rng(8)
    drafts, q, p, nd = batch(rng, B=6)
    kw = dict(seeds=1, request_ids=np.arange(6), steps=0, num_drafts=nd)
    clean = specdec.verify(specdec.Strict(), drafts, q, p, **kw)
    p2, drafts2 = p.copy(), drafts.copy()
    p2[1:, :, :] = np.nan
    drafts2[2:] = -5
    dirty = specdec.verify(specdec.Strict(), drafts2, q, p2, **kw)
    assert dirty.tokens[0].tolist() == clean.tokens[0].tolist()
    assert not specdec.is_valid(dirty.status[1:]).any() or (nd[1:] == 0).any()


def test_the_randomness_is_addressed_by_seed_id_and_step():
    rng = np.random.default_rng(9)
    drafts, q, p, nd = batch(rng, B=200, V=50)
    base = dict(seeds=1, request_ids=np.arange(200), steps=0, num_drafts=nd)
    r0 = specdec.verify(specdec.Strict(), drafts, q, p, **base)
    assert specdec.verify(specdec.Strict(), drafts, q, p, **base).tokens.tolist() == r0.tokens.tolist()
    for change in (dict(seeds=2), dict(steps=1), dict(request_ids=np.arange(200) + 1)):
        r1 = specdec.verify(specdec.Strict(), drafts, q, p, **{**base, **change})
        assert (r1.tokens != r0.tokens).any(), change


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_packed_layout_equals_padded(backend, rule):
    rng = np.random.default_rng(12)
    drafts, q, p, nd = batch(rng)
    B, n = drafts.shape
    kw = dict(seeds=3, request_ids=np.arange(B) * 3, steps=2, backend=backend)
    padded = specdec.verify(rule, drafts, q, p, num_drafts=nd, **kw)
    pk_drafts = np.concatenate([drafts[b, :nd[b]] for b in range(B)])
    pk_q = np.concatenate([q[b, :nd[b]] for b in range(B)])
    pk_p = np.concatenate([p[b, :nd[b] + 1] for b in range(B)])
    packed = specdec.verify(rule, pk_drafts, pk_q, pk_p, num_drafts=nd, **kw)
    w = packed.tokens.shape[1]
    assert w == nd.max() + 1
    np.testing.assert_array_equal(padded.tokens[:, :w], packed.tokens)
    assert (padded.tokens[:, w:] == -1).all()
    np.testing.assert_array_equal(padded.num_accepted, packed.num_accepted)
    np.testing.assert_array_equal(padded.status, packed.status)
    cu = specdec.verify(rule, pk_drafts, pk_q, pk_p, cu_num_drafts=np.cumsum(nd), **kw)
    np.testing.assert_array_equal(cu.tokens, packed.tokens)


def test_outputs_are_padded_and_emit_the_accepted_prefix(backend):
    rng = np.random.default_rng(13)
    for rule in RULES:
        drafts, q, p, nd = batch(rng, B=40, V=9)
        r = specdec.verify(rule, drafts, q, p, seeds=5, request_ids=np.arange(40), steps=0, num_drafts=nd,
                           backend=backend)
        assert r.tokens.dtype == np.int32 and r.num_accepted.dtype == np.int32 and r.status.dtype == np.uint8
        for b in range(40):
            k = int(r.num_accepted[b])
            assert 0 <= k <= nd[b]
            assert r.tokens[b, :k].tolist() == drafts[b, :k].tolist()
            assert r.emitted(b) == r.tokens[b, :k + 1].tolist()
            assert 0 <= r.tokens[b, k] < 9 and (r.tokens[b, k + 1:] == -1).all()
            assert r.status[b] == 0


def test_flags_bad_token_invalid_row_and_q_zero():
    V = 4
    q = np.array([[[0.5, 0.5, 0.0, 0.0]]])
    p = np.array([[[0.25] * 4, [0.25] * 4]])
    kw = dict(seeds=0, request_ids=[0], steps=0)
    r = specdec.verify(specdec.Strict(), np.array([[V]]), q, p, **kw)
    assert r.status[0] == specdec.Status.BAD_DRAFT_TOKEN and r.tokens.tolist() == [[-1, -1]]
    r = specdec.verify(specdec.Strict(), np.array([[-3]]), q, p, **kw)
    assert r.status[0] == specdec.Status.BAD_DRAFT_TOKEN
    r = specdec.verify(specdec.Strict(), np.array([[2]]), q, p, **kw)  # q(2) = 0
    assert r.status[0] == specdec.Status.DRAFT_PROB_ZERO and r.num_accepted[0] == 0 and specdec.is_valid(r.status[0])
    bad = p.copy()
    bad[0, 0, 3] = np.nan  # the residual reads the whole row: flagged, no token
    r = specdec.verify(specdec.Strict(), np.array([[2]]), q, bad, **kw)
    assert r.status[0] & specdec.Status.INVALID_ROW and r.tokens[0, 0] == -1 and not specdec.is_valid(r.status[0])
    r = specdec.verify(specdec.Greedy(), np.array([[0]]), None, -p, **kw)
    assert r.status[0] & specdec.Status.INVALID_ROW


def test_residual_without_mass_falls_back_to_p():
    # p = q / 2 (not normalised): accepted with probability 1/2; the residual max(0, p - q) is 0.
    q = np.array([[[0.0, 0.0, 1.0]]])
    p = np.array([[[0.0, 0.0, 0.5], [1.0, 0.0, 0.0]]])
    seen = set()
    for seed in range(64):
        r = specdec.verify(specdec.Strict(), np.array([[2]]), q, p, seeds=seed, request_ids=[0], steps=0)
        seen.add(int(r.status[0]))
        if r.status[0] == specdec.Status.RESIDUAL_FALLBACK:
            assert r.tokens.tolist() == [[2, -1]]  # sampled from p, whose only mass is on 2
        else:
            assert r.status[0] == 0 and r.tokens.tolist() == [[2, 0]]
    assert seen == {0, int(specdec.Status.RESIDUAL_FALLBACK)}


def test_check_normalisation_flags_rows_that_do_not_sum_to_one():
    q = np.array([[[0.5, 0.5]]])
    p = np.array([[[0.5, 0.6], [0.5, 0.5]]])
    kw = dict(seeds=0, request_ids=[0], steps=0)
    assert specdec.verify(specdec.Strict(), np.array([[0]]), q, p, **kw).status[0] & specdec.Status.NOT_NORMALISED == 0
    r = specdec.verify(specdec.Strict(), np.array([[0]]), q, p, check_normalisation=True, **kw)
    assert r.status[0] & specdec.Status.NOT_NORMALISED


def test_empty_batch():
    r = specdec.verify(specdec.Strict(), np.zeros(0, np.int32), np.zeros((0, 5), np.float32),
                       np.zeros((0, 5), np.float32), num_drafts=np.zeros(0, np.int32), seeds=[], request_ids=[],
                       steps=[])
    assert r.tokens.shape == (0, 1) and r.num_accepted.shape == (0,)


@pytest.mark.parametrize("packed", [False, True])
def test_results_are_written_into_the_callers_arrays(backend, packed):
    rng = np.random.default_rng(21)
    drafts, q, p, nd = batch(rng, B=10)
    if packed:
        drafts = np.concatenate([drafts[b, :nd[b]] for b in range(10)])
        q = np.concatenate([q[b, :nd[b]] for b in range(10)])
        p = np.concatenate([p[b, :nd[b] + 1] for b in range(10)])
    W = (nd.max() if packed else 4) + 1
    kw = dict(seeds=4, request_ids=np.arange(10), steps=1, num_drafts=nd, backend=backend)
    fresh = specdec.verify(specdec.Strict(), drafts, q, p, **kw)
    out = (np.full((10, W), 77, np.int32), np.full(10, 77, np.int32), np.full(10, 77, np.uint8))
    r = specdec.verify(specdec.Strict(), drafts, q, p, out=out, **kw)
    assert all(a is b for a, b in zip(r, out))  # the caller's arrays, written in place
    for a, b in zip(fresh, out):
        np.testing.assert_array_equal(a, b)
    with np.errstate(divide="ignore"):  # log(0) = -inf: an impossible token
        logits = specdec.verify_from_logits(specdec.Greedy(), drafts, np.log(p), out=out, **kw)
    assert logits.tokens is out[0]
    np.testing.assert_array_equal(out[0], specdec.verify(specdec.Greedy(), drafts, None, p, **kw).tokens)


def test_out_arrays_are_checked():
    drafts, q, p = np.zeros((2, 1), np.int32), np.full((2, 1, 3), 1 / 3), np.full((2, 2, 3), 1 / 3)
    kw = dict(seeds=0, request_ids=[0, 1], steps=0)
    good = (np.zeros((2, 2), np.int32), np.zeros(2, np.int32), np.zeros(2, np.uint8))
    with pytest.raises(TypeError, match="out.tokens: dtype must be int32"):
        specdec.verify(specdec.Strict(), drafts, q, p, out=(good[0].astype(np.int64),) + good[1:], **kw)
    with pytest.raises(ValueError, match="out.num_accepted: expected shape"):
        specdec.verify(specdec.Strict(), drafts, q, p, out=(good[0], np.zeros(3, np.int32), good[2]), **kw)
    ro = good[2].copy()
    ro.setflags(write=False)
    with pytest.raises(TypeError, match="out.status: must be C-contiguous and writable"):
        specdec.verify(specdec.Strict(), drafts, q, p, out=(good[0], good[1], ro), **kw)

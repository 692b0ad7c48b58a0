"""specdec.sample, sample_logits, softmax, warp_logits, verify_from_logits and the random streams."""

import numpy as np
import pytest

import specdec
from conftest import chi2_critical, chi2_statistic, random_rows, sample_from

TS = specdec.Purpose.TARGET_SAMPLE


def test_philox_known_answer():
    # Random123's known-answer vectors for Philox4x32-10
    assert specdec.philox4x32_10([0, 0, 0, 0], [0, 0]) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    assert specdec.philox4x32_10([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2) == (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)


def test_uniforms_lie_in_the_unit_interval_and_differ_by_address():
    us = [specdec.uniform(1, r, s, i, p) for r in range(3) for s in range(3) for i in range(3) for p in (0, 1, 3)]
    assert all(0.0 <= u < 1.0 for u in us)
    assert len(set(us)) == len(us)


def test_sample_inverts_the_cdf_at_the_addressed_uniform(backend):
    rng = np.random.default_rng(1)
    R, V = 200, 37
    w = random_rows(rng, (R, V), np.float64, zeros=0.4) * rng.uniform(0.5, 3.0, (R, 1))  # unnormalised weights
    seeds, rids, steps = rng.integers(0, 2**50, R), rng.permutation(5000)[:R], rng.integers(0, 5, R)
    s = specdec.sample(w, seeds=seeds, request_ids=rids, steps=steps, position=2, backend=backend)
    assert (s.status == specdec.RowStatus.OK).all()
    for r in range(R):
        cdf = np.cumsum(w[r])
        x = specdec.uniform(int(seeds[r]), int(rids[r]), int(steps[r]), 2, TS) * cdf[-1]
        t = int(s.tokens[r])
        assert w[r, t] > 0
        assert (cdf[t - 1] if t else 0.0) - 1e-9 <= x <= cdf[t] + 1e-9


def test_sample_flags_rows_it_cannot_sample():
    w = np.array([[0.0, 0.0], [np.nan, 1.0], [0.3, 0.7]], np.float32)
    s = specdec.sample(w, seeds=0, request_ids=[0, 1, 2], steps=0)
    assert s.status.tolist() == [specdec.RowStatus.NO_MASS, specdec.RowStatus.NOT_FINITE, specdec.RowStatus.OK]
    assert s.tokens.tolist()[:2] == [-1, -1]


@pytest.mark.skipif(not specdec.HAS_SIMD, reason="this build has no simd backend (xsimd was not found)")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sampling_simd_equals_seq(dtype):
    rng = np.random.default_rng(2)
    R, V = 64, 5000
    logits = (rng.standard_normal((R, V)) * 3).astype(dtype)
    kw = dict(seeds=rng.integers(0, 2**40, R), request_ids=np.arange(R), steps=1)
    probs = specdec.softmax(logits, backend="seq")
    np.testing.assert_array_equal(specdec.sample(probs, backend="seq", **kw).tokens,
                                  specdec.sample(probs, backend="simd", **kw).tokens)
    warp = dict(temperature=rng.uniform(0.5, 1.5, R), top_k=rng.integers(0, 50, R), top_p=rng.uniform(0.5, 1.0, R),
                min_p=np.where(rng.random(R) < 0.5, 0.0, 0.01))
    a = specdec.sample_logits(logits, backend="seq", **warp, **kw)
    b = specdec.sample_logits(logits, backend="simd", **warp, **kw)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.status, b.status)


def test_sample_logits_law_with_top_k_and_temperature(backend):
    logits = np.log(np.array([0.1, 0.4, 0.05, 0.3, 0.15]))
    n = 20_000
    s = specdec.sample_logits(np.tile(logits, (n, 1)), temperature=0.5, top_k=3, seeds=4, request_ids=np.arange(n),
                              steps=0, backend=backend)
    w = np.exp(logits / 0.5)
    w[np.argsort(w)[:2]] = 0.0  # top-3 keeps ids 1, 3, 4
    stat, dof = chi2_statistic(np.bincount(s.tokens, minlength=5), w / w.sum())
    assert stat < chi2_critical(dof)
    # negative control: the law without top-k must be rejected
    full = np.exp(logits / 0.5)
    stat, dof = chi2_statistic(np.bincount(s.tokens, minlength=5), full / full.sum())
    assert stat > chi2_critical(dof)


def test_sample_logits_at_temperature_zero_is_argmax():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((50, 100)).astype(np.float32)
    s = specdec.sample_logits(logits, temperature=0.0, seeds=1, request_ids=np.arange(50), steps=0)
    np.testing.assert_array_equal(s.tokens, logits.argmax(axis=1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_matches_numpy(backend, dtype):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((10, 300)) * 5).astype(dtype)
    t = rng.uniform(0.3, 2.0, 10)
    ref = np.exp(x / t[:, None] - (x / t[:, None]).max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    got = specdec.softmax(x, t, backend=backend)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-7)
    one = specdec.softmax(x[0], backend=backend)
    assert one.shape == (300,)
    probs, status = specdec.softmax(np.array([[0.0, np.nan], [-np.inf, -np.inf]]), return_status=True)
    assert status.tolist() == [specdec.RowStatus.NOT_FINITE, specdec.RowStatus.NO_MASS]


def test_warp_logits_filters(backend):
    x = np.log(np.array([[0.1, 0.4, 0.05, 0.3, 0.15]]))
    k2 = specdec.warp_logits(x, top_k=2, backend=backend)
    np.testing.assert_allclose(k2, [[0, 0.4 / 0.7, 0, 0.3 / 0.7, 0]], atol=1e-12)
    p = specdec.warp_logits(x, top_p=0.75, backend=backend)  # 0.4 + 0.3 = 0.7 < 0.75: keeps 0.15 too
    np.testing.assert_allclose(p, [[0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85]], atol=1e-12)
    m = specdec.warp_logits(x, min_p=0.5, backend=backend)  # keep p >= 0.5 * 0.4
    np.testing.assert_allclose(m, [[0, 0.4 / 0.7, 0, 0.3 / 0.7, 0]], atol=1e-12)


def logits_batch(rng, B=16, n=3, V=40):
    qlog = rng.standard_normal((B, n, V))
    plog = rng.standard_normal((B, n + 1, V))
    drafts = sample_from(rng, specdec.softmax(qlog.reshape(-1, V)).reshape(B, n, V))
    return drafts, qlog, plog


@pytest.mark.parametrize("rule", [specdec.Strict(), specdec.Lenient(0.7), specdec.Block(), specdec.Greedy(),
                                  specdec.SampleAndMatch()], ids=repr)
def test_verify_from_logits_with_identity_warp_equals_verify_on_softmax(backend, rule):
    # With temperature 1 and no filters, the warped rows are the softmax rows; the bonus and
    # sample-and-match's samples are drawn from logits by the same sampling contract.
    rng = np.random.default_rng(6)
    drafts, qlog, plog = logits_batch(rng)
    B, n, V = qlog.shape
    kw = dict(seeds=5, request_ids=np.arange(B), steps=0, backend=backend)
    a = specdec.verify_from_logits(rule, drafts, plog, draft_logits=qlog, **kw)
    q = specdec.warp_logits(qlog.reshape(-1, V), backend=backend).reshape(B, n, V)
    b = specdec.verify_from_logits(rule, drafts, plog, draft_probs=q, **kw)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    qx = np.take_along_axis(q, drafts[..., None], axis=2)[..., 0]
    c = specdec.verify_from_logits(rule, drafts, plog, draft_logits=qlog, q_at_drafts=qx, **kw)
    np.testing.assert_array_equal(a.tokens, c.tokens)
    np.testing.assert_array_equal(a.num_accepted, c.num_accepted)
    # the accepted counts of a rejection rule are those of verify on the warped rows
    if rule.reads_q and not isinstance(rule, specdec.Block):
        p = specdec.warp_logits(plog.reshape(-1, V), backend=backend).reshape(B, n + 1, V)
        d = specdec.verify(rule, drafts, q, p, **kw)
        np.testing.assert_array_equal(a.num_accepted, d.num_accepted)


def test_verify_from_logits_per_request_warp_is_per_request():
    rng = np.random.default_rng(7)
    drafts, qlog, plog = logits_batch(rng, B=8)
    B = 8
    temps, topk = rng.uniform(0.5, 1.5, B), rng.integers(0, 10, B)
    kw = dict(seeds=1, request_ids=np.arange(B), steps=4)
    full = specdec.verify_from_logits(specdec.Strict(), drafts, plog, draft_logits=qlog, temperature=temps, top_k=topk,
                                      draft_temperature=temps, **kw)
    for b in range(B):
        alone = specdec.verify_from_logits(specdec.Strict(), drafts[b:b + 1], plog[b:b + 1], draft_logits=qlog[b:b + 1],
                                           temperature=temps[b], top_k=topk[b], draft_temperature=temps[b], seeds=1,
                                           request_ids=[b], steps=4)
        assert alone.tokens[0].tolist() == full.tokens[b].tolist()


@pytest.mark.skipif(not specdec.HAS_SIMD, reason="this build has no simd backend (xsimd was not found)")
def test_verify_from_logits_simd_equals_seq():
    rng = np.random.default_rng(8)
    drafts, qlog, plog = logits_batch(rng, B=32, V=700)
    kw = dict(seeds=2, request_ids=np.arange(32), steps=0, temperature=0.8, top_p=0.9, top_k=50, min_p=0.01)
    for rule in (specdec.Strict(), specdec.SampleAndMatch(), specdec.Typical()):
        a = specdec.verify_from_logits(rule, drafts, plog, draft_logits=qlog, backend="seq", **kw)
        b = specdec.verify_from_logits(rule, drafts, plog, draft_logits=qlog, backend="simd", **kw)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)

"""The Python package against the C++ API itself: tests/python/cpp_reference.cpp, compiled (conftest's
`reference` fixture) against the repository's headers, runs specdec::verify, specdec::verify_tree
and specdec::sample_logits on exec::seq; the Python calls (seq and simd) must return the same
tokens, paths, counts and flags bit for bit, bad inputs included. Skipped (with the reason) where no
C++20 compiler is found."""

import numpy as np
import pytest

import specdec
from conftest import random_rows, read, run_reference, sample_from

KINDS = {specdec.Strict: 0, specdec.Lenient: 1, specdec.Greedy: 2, specdec.SampleAndMatch: 3, specdec.Block: 4,
         specdec.Typical: 5, specdec.RecursiveRejection: 6, specdec.KSeq: 7, specdec.TargetOnly: 8}
RULES = [specdec.Strict(), specdec.Lenient(0.4), specdec.Lenient(3.0), specdec.Greedy(), specdec.SampleAndMatch(),
         specdec.Block(), specdec.Typical(), specdec.Typical(0.2, 0.5, 1e-5, "typical_sample")]


def rule_meta(rule):
    k = KINDS[type(rule)]
    if isinstance(rule, specdec.Lenient):
        return f"{k} {rule.lenience!r} 0 0 0"
    if isinstance(rule, specdec.Typical):
        return f"{k} {rule.epsilon!r} {rule.delta!r} {rule.log_offset!r} {0 if rule.correction == 'argmax' else 1}"
    return f"{k} 0 0 0 0"


def chain_case(rng, dtype, packed, B=20, n=4, V=23):
    """A ragged batch with bad data in some requests: NaN and negative rows, ids outside [0, V),
    q(x) = 0, and an unnormalised p whose residual can be empty."""
    q = random_rows(rng, (B, n, V), dtype, zeros=0.3)
    p = random_rows(rng, (B, n + 1, V), dtype, zeros=0.3)
    drafts = sample_from(rng, q).astype(np.int32)
    nd = rng.integers(0, n + 1, B).astype(np.int32)
    p[1, 0, :] = np.nan
    p[2, 1, 3] = -0.5
    drafts[3, 0] = V
    drafts[4, 1] = -2
    q[5, 0, drafts[5, 0]] = 0.0
    p[6, :n] = 0.5 * q[6]  # p = q / 2 at the drafted positions: an empty residual on rejection
    seeds = rng.integers(0, 2**63, B, dtype=np.uint64)
    ids = rng.permutation(2**20)[:B].astype(np.uint32)
    steps = rng.integers(0, 50, B).astype(np.uint32)
    if packed:
        drafts = np.concatenate([drafts[b, :nd[b]] for b in range(B)])
        q = np.concatenate([q[b, :nd[b]] for b in range(B)])
        p = np.concatenate([p[b, :nd[b] + 1] for b in range(B)])
    return dict(drafts=drafts, q=q, p=p, nd=nd, seeds=seeds, ids=ids, steps=steps, n=n, V=V)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_verify_equals_the_cpp_api(reference, tmp_path, packed, dtype):
    rng = np.random.default_rng(2024 + packed)
    cases = [(rule, chain_case(rng, dtype, packed), tmp_path / f"case{i}_{j}") for i, rule in enumerate(RULES)
             for j in range(3)]
    run_reference(reference, [
        (d, f"verify {rule_meta(rule)} {int(packed)} {c['V']} {int(dtype == np.float64)} {c['n']}",
         dict(num_drafts=c["nd"], tokens=c["drafts"], q=c["q"] if rule.reads_q else np.zeros(0, dtype), p=c["p"],
              seeds=c["seeds"], ids=c["ids"], steps=c["steps"])) for rule, c, d in cases])
    flags_seen = 0
    for rule, c, d in cases:
        want_tokens = read(d, "out_tokens", np.int32)
        want_accepted = read(d, "out_accepted", np.int32)
        want_status = read(d, "out_status", np.uint8)
        flags_seen |= int(np.bitwise_or.reduce(want_status))
        for backend in specdec.BACKENDS:
            r = specdec.verify(rule, c["drafts"], c["q"] if rule.reads_q else None, c["p"], num_drafts=c["nd"],
                               seeds=c["seeds"], request_ids=c["ids"], steps=c["steps"], backend=backend)
            np.testing.assert_array_equal(r.tokens.ravel(), want_tokens, err_msg=f"{rule!r} {backend}")
            np.testing.assert_array_equal(r.num_accepted, want_accepted, err_msg=f"{rule!r} {backend}")
            np.testing.assert_array_equal(r.status, want_status, err_msg=f"{rule!r} {backend}")
    # the cases did exercise the flags
    for flag in (specdec.Status.INVALID_ROW, specdec.Status.BAD_DRAFT_TOKEN, specdec.Status.DRAFT_PROB_ZERO,
                 specdec.Status.RESIDUAL_FALLBACK):
        assert flags_seen & flag, flag


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sample_logits_equals_the_cpp_api(reference, tmp_path, dtype):
    rng = np.random.default_rng(7)
    R, V = 40, 517
    logits = (rng.standard_normal((R, V)) * 2).astype(dtype)
    logits[0, 3] = np.nan
    logits[1, :] = -np.inf
    warp = dict(temperature=np.where(rng.random(R) < 0.2, 0.0, rng.uniform(0.3, 2.0, R)),
                top_k=rng.integers(0, 30, R).astype(np.int32), top_p=rng.uniform(0.2, 1.0, R),
                min_p=np.where(rng.random(R) < 0.5, 0.0, rng.uniform(0.0, 0.2, R)))
    seeds = rng.integers(0, 2**63, R, dtype=np.uint64)
    ids = np.arange(R, dtype=np.uint32) * 7
    steps = np.full(R, 3, np.uint32)
    d = tmp_path / "sample"
    run_reference(reference, [(d, f"sample_logits {V} {int(dtype == np.float64)} 2 {int(specdec.Purpose.RESAMPLE)}",
                               dict(logits=logits, seeds=seeds, ids=ids, steps=steps, **warp))])
    for backend in specdec.BACKENDS:
        s = specdec.sample_logits(logits, seeds=seeds, request_ids=ids, steps=steps, position=2,
                                  purpose=specdec.Purpose.RESAMPLE, backend=backend, **warp)
        np.testing.assert_array_equal(s.tokens, read(d, "out_tokens", np.int32), err_msg=backend)
        np.testing.assert_array_equal(s.status, read(d, "out_status", np.uint8), err_msg=backend)
    assert s.status[0] == specdec.RowStatus.NOT_FINITE and s.status[1] == specdec.RowStatus.NO_MASS


TREE_RULES = [specdec.Strict(), specdec.RecursiveRejection(), specdec.KSeq(), specdec.TargetOnly(), specdec.Greedy(),
              specdec.SampleAndMatch(), specdec.Typical(), specdec.Typical(0.2, 0.5, 1e-5, "typical_sample")]


def tree_case(rng, dtype, B=16, V=11):
    """A batch of random trees (up to 9 nodes; each node's parent an earlier node, children drawn
    from the parent's q row) with bad data in some requests: a NaN row, a negative entry, ids outside
    [0, V), q(x) = 0, and a duplicated sibling."""
    num_nodes = rng.integers(1, 10, B).astype(np.int32)
    num_nodes[:6] = np.maximum(num_nodes[:6], 3)
    parents = np.concatenate([[-1] + [int(rng.integers(0, i)) for i in range(1, n)] for n in num_nodes])
    parents = parents.astype(np.int32)
    N = int(num_nodes.sum())
    q = random_rows(rng, (N, V), dtype, zeros=0.3)
    p = random_rows(rng, (N, V), dtype, zeros=0.3)
    off = np.concatenate([[0], np.cumsum(num_nodes)])
    tokens = np.full(N, -1, np.int32)
    for b in range(B):
        for i in range(1, num_nodes[b]):
            tokens[off[b] + i] = sample_from(rng, q[off[b] + parents[off[b] + i]])
    p[off[0]] = np.nan  # request 0: the root's target row
    p[off[1], 2] = -0.5  # request 1
    tokens[off[2] + 1] = V  # request 2
    tokens[off[3] + 2] = -3  # request 3
    q[off[4] + parents[off[4] + 1], tokens[off[4] + 1]] = 0.0  # request 4: q(x) = 0
    parents[off[5] + 2] = parents[off[5] + 1]  # request 5: node 2 a sibling of node 1 ...
    tokens[off[5] + 2] = tokens[off[5] + 1]  # ... with the same token
    seeds = rng.integers(0, 2**63, B, dtype=np.uint64)
    ids = rng.permutation(2**20)[:B].astype(np.uint32)
    steps = rng.integers(0, 50, B).astype(np.uint32)
    return dict(num_nodes=num_nodes, parents=parents, tokens=tokens, q=q, p=p, seeds=seeds, ids=ids, steps=steps, V=V)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_verify_tree_equals_the_cpp_api(reference, tmp_path, dtype):
    rng = np.random.default_rng(77)
    cases = [(rule, tree_case(rng, dtype), tmp_path / f"tree{i}_{j}") for i, rule in enumerate(TREE_RULES)
             for j in range(3)]
    run_reference(reference, [
        (d, f"verify_tree {rule_meta(rule)} {c['V']} {int(dtype == np.float64)}",
         dict(num_nodes=c["num_nodes"], parents=c["parents"], tokens=c["tokens"],
              q=c["q"] if rule.reads_q else np.zeros(0, dtype), p=c["p"], seeds=c["seeds"], ids=c["ids"],
              steps=c["steps"])) for rule, c, d in cases])
    flags_seen = 0
    accepted_seen = 0
    for rule, c, d in cases:
        want = {name: read(d, f"out_{name}", dt) for name, dt in
                (("tokens", np.int32), ("path", np.int32), ("accepted", np.int32), ("status", np.uint8))}
        flags_seen |= int(np.bitwise_or.reduce(want["status"]))
        accepted_seen += int(want["accepted"].sum())
        for backend in specdec.BACKENDS:
            r = specdec.verify_tree(rule, c["parents"], c["tokens"], c["q"] if rule.reads_q else None, c["p"],
                                    num_nodes=c["num_nodes"], seeds=c["seeds"], request_ids=c["ids"], steps=c["steps"],
                                    backend=backend)
            np.testing.assert_array_equal(r.tokens.ravel(), want["tokens"], err_msg=f"{rule!r} {backend}")
            np.testing.assert_array_equal(r.path.ravel(), want["path"], err_msg=f"{rule!r} {backend}")
            np.testing.assert_array_equal(r.num_accepted, want["accepted"], err_msg=f"{rule!r} {backend}")
            np.testing.assert_array_equal(r.status, want["status"], err_msg=f"{rule!r} {backend}")
    assert accepted_seen > 0  # some drafts were accepted
    for flag in (specdec.Status.INVALID_ROW, specdec.Status.BAD_DRAFT_TOKEN, specdec.Status.DRAFT_PROB_ZERO):
        assert flags_seen & flag, flag


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_verify_tree_from_logits_equals_the_cpp_api(reference, tmp_path, dtype):
    # The same random trees, their target rows as logits (-inf entries where p was 0, NaN and bad ids
    # kept), each tree warped with its own temperature / top-k / top-p / min-p.
    rng = np.random.default_rng(78)
    cases = []
    for i, rule in enumerate(TREE_RULES):
        for j in range(3):
            c = tree_case(rng, dtype)
            with np.errstate(divide="ignore", invalid="ignore"):
                c["p"] = (np.log(c["p"]) * rng.uniform(1.0, 3.0)).astype(dtype)
            B = len(c["num_nodes"])
            c["warp"] = dict(temperature=np.where(rng.random(B) < 0.2, 0.0, rng.uniform(0.3, 2.0, B)),
                             top_k=np.where(rng.random(B) < 0.5, 0, rng.integers(1, 6, B)).astype(np.int32),
                             top_p=np.where(rng.random(B) < 0.5, 1.0, rng.uniform(0.3, 1.0, B)),
                             min_p=np.where(rng.random(B) < 0.7, 0.0, rng.uniform(0.0, 0.2, B)))
            cases.append((rule, c, tmp_path / f"treelogits{i}_{j}"))
    run_reference(reference, [
        (d, f"verify_tree_logits {rule_meta(rule)} {c['V']} {int(dtype == np.float64)}",
         dict(num_nodes=c["num_nodes"], parents=c["parents"], tokens=c["tokens"],
              q=c["q"] if rule.reads_q else np.zeros(0, dtype), p=c["p"], seeds=c["seeds"], ids=c["ids"],
              steps=c["steps"], **c["warp"])) for rule, c, d in cases])
    accepted_seen, flags_seen = 0, 0
    for rule, c, d in cases:
        want = {name: read(d, f"out_{name}", dt) for name, dt in
                (("tokens", np.int32), ("path", np.int32), ("accepted", np.int32), ("status", np.uint8))}
        accepted_seen += int(want["accepted"].sum())
        flags_seen |= int(np.bitwise_or.reduce(want["status"]))
        for backend in specdec.BACKENDS:
            r = specdec.verify_tree_from_logits(rule, c["parents"], c["tokens"], c["q"] if rule.reads_q else None,
                                                c["p"], num_nodes=c["num_nodes"], seeds=c["seeds"],
                                                request_ids=c["ids"], steps=c["steps"], backend=backend, **c["warp"])
            for name, got in (("tokens", r.tokens.ravel()), ("path", r.path.ravel()), ("accepted", r.num_accepted),
                              ("status", r.status)):
                np.testing.assert_array_equal(got, want[name], err_msg=f"{name}: {rule!r} {backend}")
    assert accepted_seen > 0
    for flag in (specdec.Status.INVALID_ROW, specdec.Status.BAD_DRAFT_TOKEN):
        assert flags_seen & flag, flag

"""The Python package against the C++ API itself: tests/python/cpp_reference.cpp, compiled here
against the repository's headers, runs specdec::verify and specdec::sample_logits on exec::seq; the
Python calls (seq and simd) must return the same tokens, counts and flags bit for bit, bad inputs
included. Skipped (with the reason) where no C++20 compiler is found."""

import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import specdec
from conftest import random_rows, sample_from

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KINDS = {specdec.Strict: 0, specdec.Lenient: 1, specdec.Greedy: 2, specdec.SampleAndMatch: 3, specdec.Block: 4,
         specdec.Typical: 5}
RULES = [specdec.Strict(), specdec.Lenient(0.4), specdec.Lenient(3.0), specdec.Greedy(), specdec.SampleAndMatch(),
         specdec.Block(), specdec.Typical(), specdec.Typical(0.2, 0.5, 1e-5, "typical_sample")]


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx is None:
        pytest.skip("no C++ compiler (set CXX) to build tests/python/cpp_reference.cpp")
    exe = tmp_path_factory.mktemp("cpp") / "cpp_reference"
    cmd = [cxx, "-std=c++20", "-O1", f"-I{ROOT / 'include'}", str(HERE / "cpp_reference.cpp"), "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"compiling the C++ reference failed:\n{' '.join(cmd)}\n{done.stderr[-4000:]}")
    return exe


def write(d, meta, **arrays):
    d.mkdir()
    (d / "meta.txt").write_text(meta + "\n")
    for name, a in arrays.items():
        np.ascontiguousarray(a).tofile(d / f"{name}.bin")


def read(d, name, dtype):
    return np.fromfile(d / f"{name}.bin", dtype=dtype)


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
    cases = []
    for i, rule in enumerate(RULES):
        for j in range(3):
            c = chain_case(rng, dtype, packed)
            d = tmp_path / f"case{i}_{j}"
            write(d, f"verify {rule_meta(rule)} {int(packed)} {c['V']} {int(dtype == np.float64)} {c['n']}",
                  num_drafts=c["nd"], tokens=c["drafts"], q=c["q"] if rule.reads_q else np.zeros(0, dtype), p=c["p"],
                  seeds=c["seeds"], ids=c["ids"], steps=c["steps"])
            cases.append((rule, c, d))
    done = subprocess.run([str(reference)] + [str(d) for _, _, d in cases], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
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
    write(d, f"sample_logits {V} {int(dtype == np.float64)} 2 {int(specdec.Purpose.RESAMPLE)}", logits=logits,
          seeds=seeds, ids=ids, steps=steps, **warp)
    done = subprocess.run([str(reference), str(d)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for backend in specdec.BACKENDS:
        s = specdec.sample_logits(logits, seeds=seeds, request_ids=ids, steps=steps, position=2,
                                  purpose=specdec.Purpose.RESAMPLE, backend=backend, **warp)
        np.testing.assert_array_equal(s.tokens, read(d, "out_tokens", np.int32), err_msg=backend)
        np.testing.assert_array_equal(s.status, read(d, "out_status", np.uint8), err_msg=backend)
    assert s.status[0] == specdec.RowStatus.NOT_FINITE and s.status[1] == specdec.RowStatus.NO_MASS

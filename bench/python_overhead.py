#!/usr/bin/env python3
"""Call overhead of the specdec Python package against the C++ call (issue 40's goal: under 5 us).

    python bench/python_overhead.py [--calls 20000] [--rounds 20] [--large-vocab 32000] [--no-cpp]

Times, per call (time.perf_counter_ns around each call, the median of --calls calls taken in
--rounds interleaved rounds so that a change in the machine's load hits every case alike):
  - C++ specdec::verify and specdec::verify_from_logits (bench/python/verify_call.cpp, compiled here with
    $CXX or c++; skipped without one),
  - the extension alone, specdec._core.verify (nanobind's dispatch, its array checks, the kernel, the
    output arrays), with new outputs and with the caller's (out=), and _core.verify_direct (the call
    specdec.verify makes first: the user's arguments checked in C++, declined unless in final form),
  - specdec.verify with typed arrays (int32 tokens, uint64 seeds, uint32 ids and steps), with out=,
    and with Python lists and scalars,
  - specdec.verify_from_logits with typed arrays (draft and target logits, one temperature for every
    request) and its direct call alone, _core.verify_from_logits_direct,
  - specdec.sample_logits with typed arrays (B rows, one temperature for every row),
on an empty batch (B = 0) and a small one (B = 1, n = 1, V = 8), float32, strict rule, the default
backend, every case of both batches interleaved in the same rounds after one warm-up round; then one
large batch (B = 64, n = 4, V = --large-vocab) for C++ against specdec.verify.
Prints a table; nothing is asserted (timings are not tests).
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import specdec
from specdec import _core

ROOT = pathlib.Path(__file__).resolve().parent.parent


def build_cpp():
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx is None:
        return None, "no C++ compiler (set CXX)"
    exe = pathlib.Path(tempfile.mkdtemp()) / "verify_call"
    cmd = [cxx, "-std=c++20", "-O3", "-march=native", f"-I{ROOT / 'include'}",
           str(ROOT / "bench/python/verify_call.cpp"), "-o", str(exe)]
    if specdec.HAS_SIMD:
        cmd.insert(1, "-DSPECDEC_ENABLE_SIMD=1")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, "compiling bench/python/verify_call.cpp failed:\n" + done.stderr[-2000:]
    return exe, None


def cpp_median_ns(exe, B, n, V, calls, from_logits=None):
    """The C++ call's median (verify; with `from_logits` a temperature, verify_from_logits)."""
    env = dict(os.environ, **({} if from_logits is None else {"SPECDEC_FROM_LOGITS": str(from_logits)}))
    out = subprocess.run([str(exe), specdec.DEFAULT_BACKEND, str(B), str(n), str(V), str(calls)], capture_output=True,
                         text=True, check=True, env=env)
    return float(out.stdout)


def inputs(B, n, V):
    return dict(tokens=np.full((B, n), 3 % V, np.int32), q=np.full((B, n, V), 1 / V, np.float32),
                p=np.full((B, n + 1, V), 1 / V, np.float32), seeds=np.ones(B, np.uint64),
                ids=np.arange(7, 7 + B, dtype=np.uint32), steps=np.zeros(B, np.uint32),
                num_drafts=np.full(B, n, np.int32),
                out=(np.empty((B, n + 1), np.int32), np.empty(B, np.int32), np.empty(B, np.uint8)))


def cases(B, n, V):
    x = inputs(B, n, V)
    rule, spec, backend = specdec.Strict(), specdec.Strict()._spec(), specdec.DEFAULT_BACKEND
    out_arrays = _core.OutArrays(*x["out"])
    call = dict(seeds=x["seeds"], request_ids=x["ids"], steps=x["steps"])
    core_args = (spec, backend, False, x["num_drafts"], n, V, x["tokens"], x["q"], x["p"], x["seeds"], x["ids"],
                 x["steps"], None, False, 1e-3)
    lists = dict(tokens=x["tokens"].tolist(), ids=x["ids"].tolist())
    fns = {
        "_core.verify (extension alone)": lambda: _core.verify(*core_args, None),
        "_core.verify, out=": lambda: _core.verify(*core_args, out_arrays),
        "_core.verify_direct (the direct call alone)": lambda: _core.verify_direct(
            rule._direct_spec, backend, x["tokens"], x["q"], x["p"], x["seeds"], x["ids"], x["steps"], None, None, False, 1e-3, None),
        "specdec.verify, typed arrays": lambda: specdec.verify(rule, x["tokens"], x["q"], x["p"], **call),
        "specdec.verify, typed arrays, out=": lambda: specdec.verify(rule, x["tokens"], x["q"], x["p"], out=x["out"],
                                                                     **call),
    }
    logits = dict(draft_logits=x["q"], temperature=0.7, **call)
    fns["_core.verify_from_logits_direct (alone)"] = lambda: _core.verify_from_logits_direct(
        rule._direct_spec, backend, x["tokens"], x["p"], x["seeds"], x["ids"], x["steps"], x["q"], None, None, None, None,
        0.7, 0, 1.0, 0.0, None, None, None, None, None)
    fns["specdec.verify_from_logits, typed arrays"] = lambda: specdec.verify_from_logits(rule, x["tokens"], x["p"],
                                                                                        **logits)
    rows = x["p"].reshape(-1, V)[:B]  # B rows of V
    fns["specdec.sample_logits, typed arrays"] = lambda: specdec.sample_logits(rows, temperature=0.7, **call)
    if B:  # [] cannot say [B, n] = [0, 1]
        fns["specdec.verify, lists and scalars"] = lambda: specdec.verify(
            rule, lists["tokens"], x["q"], x["p"], seeds=1, request_ids=lists["ids"], steps=0)
    return fns


def median_us(fns, calls, rounds, warm_up=True):
    """Median microseconds per call of each function, the calls spread over interleaved rounds (after
    one round that is not counted, when `warm_up`)."""
    times = {name: [] for name in fns}
    per_round = max(calls // rounds, 1)
    clock = time.perf_counter_ns
    if warm_up:
        for fn in fns.values():
            for _ in range(per_round):
                fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            t = times[name]
            for _ in range(per_round):
                t0 = clock()
                fn()
                t.append(clock() - t0)
    return {name: float(np.median(t)) / 1000 for name, t in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--large-vocab", type=int, default=32000)
    ap.add_argument("--large-calls", type=int, default=60)
    ap.add_argument("--no-cpp", action="store_true")
    a = ap.parse_args()
    exe, why = (None, "--no-cpp") if a.no_cpp else build_cpp()
    print(f"specdec {specdec.__version__}, backend {specdec.DEFAULT_BACKEND}, Python {sys.version.split()[0]}, "
          f"numpy {np.__version__}; medians of {a.calls} calls in {a.rounds} rounds")
    if exe is None:
        print(f"C++ call not measured: {why}")
    batches = (("empty batch, B = 0", (0, 1, 8)), ("small batch, B = 1, n = 1, V = 8", (1, 1, 8)))
    both = median_us({(label, name): fn for label, shape in batches for name, fn in cases(*shape).items()}, a.calls,
                     a.rounds)
    for label, (B, n, V) in batches:
        rows = {name: us for (batch, name), us in both.items() if batch == label}
        if exe is not None:
            rows = {"C++ specdec::verify": cpp_median_ns(exe, B, n, V, a.calls) / 1000,
                    "C++ specdec::verify_from_logits": cpp_median_ns(exe, B, n, V, a.calls, 0.7) / 1000, **rows}
        print(f"\n{label}\n{'call':42s} {'us/call':>9s}")
        for name, us in rows.items():
            print(f"{name:42s} {us:9.2f}")
    B, n, V = 64, 4, a.large_vocab
    x = inputs(B, n, V)
    fns = {"specdec.verify, typed arrays, out=": lambda: specdec.verify(
        specdec.Strict(), x["tokens"], x["q"], x["p"], seeds=x["seeds"], request_ids=x["ids"], steps=x["steps"],
        out=x["out"])}
    rows = median_us(fns, a.large_calls, min(a.rounds, a.large_calls))
    if exe is not None:
        rows = {"C++ specdec::verify": cpp_median_ns(exe, B, n, V, a.large_calls) / 1000, **rows}
    print(f"\nlarge batch, B = {B}, n = {n}, V = {V} (uniform rows: every draft accepted)")
    print(f"{'call':42s} {'us/call':>9s}")
    for name, us in rows.items():
        print(f"{name:42s} {us:9.2f}")


if __name__ == "__main__":
    main()

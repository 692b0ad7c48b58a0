#!/usr/bin/env python3
"""Large-batch throughput of specdec.verify against the C++ call and plain NumPy and PyTorch
implementations of the same rule, in one run.

    python bench/python_throughput.py [--batch 64] [--gamma 4] [--vocab 128256] [--rounds 5] [--calls 10]

One padded float32 batch (B requests, gamma drafts, V entries per row; rows uniform random numbers
normalised, drafts sampled from q: an acceptance rate of about 0.75, so most requests reject a draft
and the verifier reads a residual row in full) is
written to a temporary folder and verified with the strict rule by
  - C++ specdec::verify (bench/python/verify_call.cpp reading the same files; compiled here with
    $CXX or c++, -O3 -march=native; skipped without a compiler),
  - specdec.verify (default backend) with the caller's output arrays (out=) and with new ones,
  - numpy_strict below: the same rule in vectorised NumPy (its uniforms from numpy's generator),
  - torch_strict below: the same rule in PyTorch on CPU tensors sharing the arrays' memory, one
    intra-op thread as the others use (skipped when torch is not installed),
in --rounds interleaved rounds of --calls calls each (NumPy and PyTorch: a third of them), so that a change of the
machine's load hits every case alike. Prints the median per call of each round, the medians over all
rounds, and the ratios to the C++ call; the load average before and after. Nothing is asserted.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import specdec
from python_overhead import build_cpp  # bench/python_overhead.py (the script's folder is on sys.path)


def numpy_strict(drafts, q, p, rng):
    """Standard speculative sampling on a padded batch, vectorised over requests: accept draft i iff
    u_i q_i(x_i) < p_i(x_i) until the first rejection k; emit a sample of norm(max(0, p_k - q_k)) at k,
    or of p_gamma when every draft passed. Returns int32 [B, gamma + 1] padded with -1."""
    B, n, V = q.shape
    b = np.arange(B)[:, None]
    i = np.arange(n)[None, :]
    px, qx = p[b, i, drafts], q[b, i, drafts]
    accept = rng.random((B, n)) * qx < px
    k = np.where(accept.all(axis=1), n, np.argmin(accept, axis=1))  # the first rejection, or n
    rows = p[np.arange(B), k].astype(np.float64)
    rejected = k < n
    rows[rejected] = np.maximum(rows[rejected] - q[np.flatnonzero(rejected), k[rejected]], 0.0)
    cdf = np.cumsum(rows, axis=1)
    u = rng.random(B) * cdf[:, -1]
    last = (cdf <= u[:, None]).sum(axis=1)
    out = np.full((B, n + 1), -1, np.int32)
    keep = i < k[:, None]
    out[:, :n][keep] = drafts[keep]
    out[np.arange(B), k] = np.minimum(last, V - 1)
    return out


def torch_strict(torch, drafts, q, p, generator):
    """numpy_strict in PyTorch: drafts int64 [B, n], q [B, n, V], p [B, n + 1, V] CPU tensors; rows
    picked with index_select and the correction drawn by inverse CDF (cumsum, searchsorted), which on
    CPU tensors are several times faster than advanced indexing and torch.multinomial."""
    B, n, V = q.shape
    b = torch.arange(B)[:, None]
    i = torch.arange(n)[None, :]
    px, qx = p[b, i, drafts], q[b, i, drafts]
    accept = torch.rand((B, n), generator=generator) * qx < px
    k = torch.where(accept.all(dim=1), n, torch.argmin(accept.to(torch.int8), dim=1))  # the first rejection, or n
    rows = p.view(B * (n + 1), V).index_select(0, torch.arange(B) * (n + 1) + k).to(torch.float64)
    rejected = torch.nonzero(k < n).squeeze(1)
    q_rows = q.view(B * n, V).index_select(0, rejected * n + k[rejected]).to(torch.float64)
    rows.index_copy_(0, rejected, torch.clamp(rows.index_select(0, rejected) - q_rows, min=0.0))
    cdf = torch.cumsum(rows, dim=1)
    u = torch.rand((B, 1), dtype=torch.float64, generator=generator) * cdf[:, -1:]
    last = torch.clamp(torch.searchsorted(cdf, u, right=True).squeeze(1), max=V - 1)
    out = torch.full((B, n + 1), -1, dtype=torch.int32)
    keep = i < k[:, None]
    out[:, :n][keep] = drafts[keep].to(torch.int32)
    out[torch.arange(B), k] = last.to(torch.int32)
    return out


def batch(B, n, V, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((B, n, V), dtype=np.float32)
    q /= q.sum(axis=-1, keepdims=True)
    p = rng.random((B, n + 1, V), dtype=np.float32)
    p /= p.sum(axis=-1, keepdims=True)
    cdf = np.cumsum(q, axis=-1, dtype=np.float64)
    u = rng.random((B, n, 1)) * cdf[..., -1:]
    drafts = np.minimum((cdf <= u).sum(axis=-1), V - 1).astype(np.int32)
    return drafts, q, p


def median_ms(fn, calls):
    t = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        t.append(time.perf_counter_ns() - t0)
    return float(np.median(t)) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--no-cpp", action="store_true")
    a = ap.parse_args()
    B, n, V = a.batch, a.gamma, a.vocab
    load_before = os.getloadavg()
    drafts, q, p = batch(B, n, V)
    seeds, ids, steps = np.ones(B, np.uint64), np.arange(7, 7 + B, dtype=np.uint32), np.zeros(B, np.uint32)
    out = (np.empty((B, n + 1), np.int32), np.empty(B, np.int32), np.empty(B, np.uint8))
    kw = dict(seeds=seeds, request_ids=ids, steps=steps)
    r = specdec.verify(specdec.Strict(), drafts, q, p, **kw)
    exe, why = (None, "--no-cpp") if a.no_cpp else build_cpp()
    folder = tempfile.mkdtemp()
    for name, x in (("q", q), ("p", p), ("drafts", drafts)):
        x.tofile(os.path.join(folder, f"{name}.bin"))
    print(f"specdec {specdec.__version__}, backend {specdec.DEFAULT_BACKEND}, Python {sys.version.split()[0]}, "
          f"numpy {np.__version__}; B = {B}, gamma = {n}, V = {V}, float32, strict; "
          f"{r.num_accepted.sum()} of {B * n} drafts accepted; {os.cpu_count()} CPUs")
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    if exe is None:
        print(f"C++ call not measured: {why}")
    rng = np.random.default_rng(1)
    cases = {
        "specdec.verify, out=": lambda: specdec.verify(specdec.Strict(), drafts, q, p, out=out, **kw),
        "specdec.verify": lambda: specdec.verify(specdec.Strict(), drafts, q, p, **kw),
        "NumPy (numpy_strict)": lambda: numpy_strict(drafts, q, p, rng),
    }
    try:
        import torch
    except ImportError:
        print("PyTorch not measured: torch is not installed")
    else:
        torch.set_num_threads(1)
        t_drafts, t_q, t_p = torch.from_numpy(drafts.astype(np.int64)), torch.from_numpy(q), torch.from_numpy(p)
        generator = torch.Generator().manual_seed(1)
        cases["PyTorch (torch_strict)"] = lambda: torch_strict(torch, t_drafts, t_q, t_p, generator)
        print(f"torch {torch.__version__}, 1 intra-op thread")
    rows = {"C++ specdec::verify": []} if exe is not None else {}
    rows.update({name: [] for name in cases})
    for _ in range(a.rounds):
        if exe is not None:
            done = subprocess.run([str(exe), specdec.DEFAULT_BACKEND, str(B), str(n), str(V), str(a.calls), folder],
                                  capture_output=True, text=True, check=True)
            rows["C++ specdec::verify"].append(float(done.stdout) / 1e6)
        for name, fn in cases.items():
            rows[name].append(median_ms(fn, max(a.calls // 3, 1) if name.startswith(("NumPy", "PyTorch")) else a.calls))
    load_after = os.getloadavg()
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    os.rmdir(folder)
    ref = rows.get("C++ specdec::verify")
    print(f"\n{'call':28s} {'ms/call, each round':>40s} {'median':>8s} {'/ C++':>7s}")
    for name, t in rows.items():
        ratio = f"{np.median(np.array(t) / np.array(ref)):7.2f}" if ref else ""
        print(f"{name:28s} {' '.join(f'{x:7.2f}' for x in t):>40s} {np.median(t):8.2f} {ratio}")
    print("(/ C++: the median over the rounds of each round's ratio)")
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


if __name__ == "__main__":
    main()

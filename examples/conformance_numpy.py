#!/usr/bin/env python3
"""A NumPy speculative-decoding verifier checked by specdec's conformance kit, through files.

The verifier is Leviathan et al.'s chain algorithm (strict rejection sampling): draft x_i is kept
iff u_i < p(x_i) / q(x_i); at the first rejection the block ends with a token drawn from the
residual norm(max(0, p - q)) (from p when the residual has no mass), and after n kept drafts with a
bonus token drawn from p. Requests whose rows hold NaN, infinities, negative entries or no mass, or
whose draft ids lie outside [0, V), are reported instead.

Its coins are NumPy's Philox keyed by the request alone, so that a request gives the same tokens
whatever batch it is in (the kit checks determinism, batch invariance and independence): request
b's uniforms are those of

    numpy.random.Generator(numpy.random.Philox(key=[seed, request_id], counter=[0, 0, step, 0])).random()

computed for the whole batch at once by a vectorised Philox-4x64-10 (checked bit for bit against
numpy.random.Philox at start-up). Uniform i (i < n) is the accept coin of draft i; uniform n draws
the correction or bonus token by inverse CDF.

The driver loop: run `specdec-conformance serve --dir D ...`; for each 'answer D/call_<k>' line it
reads D/call_<k>/inputs/*.npy, verifies, writes D/call_<k>/outputs/{reported,tokens}.npy and answers
'done'. At the end the CLI prints the report; this script exits with its code (0 passed, 1 failed).
With --mode step it runs `specdec-conformance step` once per call instead (stateless; each step
replays the run from the start, so it is slower).

    python3 examples/conformance_numpy.py --cli build/tools/specdec-conformance --dir /tmp/run \\
        [--fresh] [--law-requests 20000 ...]    # unknown options go to specdec-conformance

With `--form logits` (passed on to the CLI) the calls hold logits and each side's warping parameters;
the example warps them as specdec does (temperature, top-k, top-p, min-p) and verifies the warped rows.

--bug shared-seed (coins keyed without the request id), --bug nan-to-zero (NaN entries read as 0) and
--bug draft-unwarped (logits form: q taken as softmax(draft logits), not the warped row the draft was
sampled from) make the verifier deliberately wrong; the kit must then fail independence/request_id,
bad_input/target_nan_at_draft and exact_law respectively.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

# ---- Philox-4x64-10, vectorised: the generator of numpy.random.Philox ---------------------------------

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_MUL = (np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157))
_WEYL = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B))


def _mulhilo(a, b):
    """The high and low 64-bit words of the 128-bit products a * b (uint64 arrays)."""
    a_lo, a_hi = a & _M32, a >> _S32
    b_lo, b_hi = b & _M32, b >> _S32
    ll, hl, lh, hh = a_lo * b_lo, a_hi * b_lo, a_lo * b_hi, a_hi * b_hi
    cross = (ll >> _S32) + (hl & _M32) + (lh & _M32)
    return hh + (hl >> _S32) + (lh >> _S32) + (cross >> _S32), a * b


def philox4x64(c0, c1, c2, c3, k0, k1):
    """Philox-4x64-10 of counters (c0, c1, c2, c3) under keys (k0, k1): four uint64 arrays."""
    with np.errstate(over="ignore"):
        for r in range(10):
            if r:
                k0, k1 = k0 + _WEYL[0], k1 + _WEYL[1]
            hi0, lo0 = _mulhilo(_MUL[0], c0)
            hi1, lo1 = _mulhilo(_MUL[1], c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def uniforms(seeds, request_ids, steps, count):
    """[B, count] uniforms in [0, 1): row b is the first `count` values of
    Generator(Philox(key=[seeds[b], request_ids[b]], counter=[0, 0, steps[b], 0])).random()."""
    blocks = -(-count // 4)
    zero = np.zeros_like(seeds)
    words = []
    for block in range(1, blocks + 1):  # numpy increments the counter before each block
        words.extend(philox4x64(zero + np.uint64(block), zero, steps, zero, seeds, request_ids))
    raw = np.stack(words, axis=1)[:, :count]
    return (raw >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def check_philox():
    """The vectorised generator reproduces numpy.random.Philox bit for bit."""
    keys = [(0, 0, 0), (20261125, 77, 3), (2**64 - 1, 2**63 + 5, 2**40 + 9)]
    seeds, ids, steps = (np.array(k, dtype=np.uint64) for k in zip(*keys))
    ours = uniforms(seeds, ids, steps, 9)
    for b, (seed, rid, step) in enumerate(keys):
        g = np.random.Generator(np.random.Philox(key=[seed, rid], counter=[0, 0, step, 0]))
        if not np.array_equal(ours[b], g.random(9)):
            sys.exit("conformance_numpy.py: the vectorised Philox differs from numpy.random.Philox")


# ---- the verifier -------------------------------------------------------------------------------------


def draw(weights, u):
    """Row-wise inverse-CDF draws: the first v with cumsum(w)[v] > u * sum(w). Zero weights are
    never drawn (rounding at the top falls back to the last positive weight). weights: [B, V] >= 0,
    positive sums; u: [B] in [0, 1)."""
    cdf = np.cumsum(weights, axis=1)
    target = u * cdf[:, -1]
    idx = np.sum(cdf <= target[:, None], axis=1)
    last_positive = weights.shape[1] - 1 - np.argmax(weights[:, ::-1] > 0, axis=1)
    return np.minimum(idx, last_positive)


def bad_rows(rows):
    """Rows with NaN, infinities, negative entries or no mass."""
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    with np.errstate(invalid="ignore", over="ignore"):
        sums = rows.astype(np.float64).sum(axis=1)
        return ~np.isfinite(rows).all(axis=1) | (rows < 0).any(axis=1) | ~(sums > 0)


def warp(logits, temperature, top_k, top_p, min_p):
    """specdec's warping of logit rows (distributions/warp.hpp): softmax(logits / T) (T = 0: one-hot
    on the argmax), then top-k, top-p on the survivors and min-p, each keeping ties at its boundary,
    then one renormalisation. Parameters are per row. Returns probabilities [R, V] and the rows that
    cannot be warped (a NaN or +inf logit, or no finite one), which come back as zeros."""
    if ((temperature < 0) | ~np.isfinite(temperature) | (top_k < 0) | ~((top_p > 0) & (top_p <= 1))
            | ~((min_p >= 0) & (min_p <= 1))).any():
        raise ValueError("invalid warping parameters (temperature >= 0, top_k >= 0, top_p in (0, 1], min_p in [0, 1])")
    R, V = logits.shape
    bad = np.isnan(logits).any(axis=1) | np.isposinf(logits).any(axis=1) | ~np.isfinite(logits).any(axis=1)
    x = np.where(bad[:, None], 0.0, logits.astype(np.float64))
    rows = np.arange(R)
    greedy = temperature == 0
    z = x / np.where(greedy, 1.0, temperature)[:, None]
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    if greedy.any():
        p[greedy] = 0.0
        p[rows[greedy], np.argmax(x[greedy], axis=1)] = 1.0
    descending = -np.sort(-p, axis=1)
    kth = descending[rows, np.clip(top_k, 1, V) - 1]
    p[(top_k[:, None] > 0) & (p < kth[:, None])] = 0.0
    descending = -np.sort(-p, axis=1)
    reached = np.cumsum(descending, axis=1) >= (top_p * p.sum(axis=1))[:, None]
    cut = descending[rows, np.argmax(reached, axis=1)]
    p[(top_p[:, None] < 1) & (p < cut[:, None])] = 0.0
    p[(min_p[:, None] > 0) & (p < (min_p * p.max(axis=1))[:, None])] = 0.0
    p /= p.sum(axis=1, keepdims=True)
    p[bad] = 0.0
    return p, bad


def warp_call(inputs, bug=None):
    """A chain_logits call as a chain call: each request's logit rows warped with its side's
    parameters. Rows that cannot be warped become zero rows, which verify_chain reports."""
    n = inputs["num_drafts"].astype(np.int64)
    batch = np.arange(n.shape[0])
    for rows, side, owner in (("draft_probs", "draft", np.repeat(batch, n)), ("target_probs", "target", np.repeat(batch, n + 1))):
        params = [inputs[side + "_" + name][owner] for name in ("temperature", "top_k", "top_p", "min_p")]
        if bug == "draft-unwarped" and side == "draft":  # the bug: q is softmax(logits), not the row the draft sampled
            params = [np.ones(owner.shape[0]), np.zeros(owner.shape[0], dtype=np.int32), np.ones(owner.shape[0]),
                      np.zeros(owner.shape[0])]
        inputs[rows], _ = warp(inputs[rows], *params)
    return inputs


def verify_chain(inputs, bug=None):
    """Leviathan et al.'s chain verification of a batch: returns tokens [B, max_n + 1] (padded with
    -1) and reported [B]."""
    V = int(inputs["vocab_size"])
    n = inputs["num_drafts"].astype(np.int64)
    offsets = inputs["offsets"]
    drafts = inputs["draft_tokens"].astype(np.int64)
    q_rows = inputs["draft_probs"].astype(np.float64)
    p_rows = inputs["target_probs"].astype(np.float64)
    if bug == "nan-to-zero":  # the bug: NaN read as 0, so a row with a NaN beside positive entries looks healthy
        q_rows, p_rows = np.where(np.isnan(q_rows), 0.0, q_rows), np.where(np.isnan(p_rows), 0.0, p_rows)
    B = n.shape[0]
    N = int(n.max()) if B else 0
    out = np.full((B, N + 1), -1, dtype=np.int32)
    if B == 0:
        return out, np.zeros(0, dtype=bool)

    # Validation: a request is reported when any of its rows or draft ids is bad.
    batch = np.arange(B)
    draft_owner, target_owner = np.repeat(batch, n), np.repeat(batch, n + 1)
    reported = np.zeros(B, dtype=bool)
    reported[draft_owner[bad_rows(q_rows)]] = True
    reported[target_owner[bad_rows(p_rows)]] = True
    reported[draft_owner[(drafts < 0) | (drafts >= V)]] = True

    with np.errstate(invalid="ignore", divide="ignore"):
        q_rows = q_rows / q_rows.sum(axis=1, keepdims=True)
        p_rows = p_rows / p_rows.sum(axis=1, keepdims=True)

    # Request b's draft i is draft row offsets[b] + i; its target rows start at offsets[b] + b.
    pos = np.arange(N)
    live = pos[None, :] < n[:, None]
    d_idx = np.where(live, offsets[:-1, None] + pos[None, :], 0)
    t_idx = offsets[:-1, None] + batch[:, None] + np.arange(N + 1)[None, :]
    t_idx = np.where(np.arange(N + 1)[None, :] <= n[:, None], t_idx, 0)
    x = np.where(live, np.clip(drafts[d_idx], 0, V - 1), 0) if N > 0 else np.zeros((B, 0), dtype=np.int64)

    request_ids = inputs["request_ids"]
    if bug == "shared-seed":  # the bug: every request of a seed and step draws the same coins
        request_ids = np.zeros_like(request_ids)
    u = uniforms(inputs["seeds"], request_ids, inputs["steps"], N + 1)

    # Accept draft i iff u_i < p(x_i) / q(x_i); k = the number of leading accepts.
    if N > 0:
        px, qx = p_rows[t_idx[:, :N], x], q_rows[d_idx, x]
        with np.errstate(invalid="ignore", divide="ignore"):
            accept = live & (u[:, :N] < px / qx)
        k = np.argmin(np.concatenate([accept, np.zeros((B, 1), dtype=bool)], axis=1), axis=1)
    else:
        k = np.zeros(B, dtype=np.int64)

    # The last token: from the residual max(0, p - q) at the first rejection (p when it has no
    # mass), or from the bonus row p after n accepts; drawn with uniform n.
    ok = ~reported
    rows = np.nonzero(ok)[0]
    if rows.size:
        kr, nr = k[rows], n[rows]
        p = p_rows[t_idx[rows, kr]]
        rejected = kr < nr
        weights = p.copy()
        if rejected.any():
            r = rows[rejected]
            q = q_rows[d_idx[r, kr[rejected]]]
            residual = np.maximum(0.0, p[rejected] - q)
            has_mass = residual.sum(axis=1) > 0
            weights[rejected] = np.where(has_mass[:, None], residual, p[rejected])
        last = draw(weights, u[rows, nr])
        for i in range(N):  # kept drafts, then the last token
            keep = kr > i
            out[rows[keep], i] = x[rows[keep], i]
        out[rows, kr] = last
    return out, reported


# ---- files ------------------------------------------------------------------------------------------

class UsageError(Exception):
    """A run this example cannot answer: the driver stops with exit code 2."""


CHAIN_ARRAYS = ("num_drafts", "offsets", "draft_tokens", "draft_probs", "target_probs", "seeds", "request_ids", "steps")
WARP_ARRAYS = tuple(side + "_" + name for side in ("target", "draft") for name in ("temperature", "top_k", "top_p", "min_p"))


def read_call(call_dir):
    inputs_dir = os.path.join(call_dir, "inputs")
    with open(os.path.join(inputs_dir, "meta.json")) as f:
        meta = json.load(f)
    if meta["form"] not in ("chain", "chain_logits"):
        raise UsageError("this example verifies chains, from probabilities or logits (the call is a %s)" % meta["form"])
    names = CHAIN_ARRAYS + (WARP_ARRAYS if meta["form"] == "chain_logits" else ())
    inputs = {name: np.load(os.path.join(inputs_dir, name + ".npy")) for name in names}
    inputs["vocab_size"] = meta["vocab_size"]
    inputs["form"] = meta["form"]
    return inputs


def write_atomically(path, array):
    with open(path + ".partial", "wb") as f:
        np.save(f, array)
    os.replace(path + ".partial", path)


def answer(call_dir, bug):
    outputs = os.path.join(call_dir, "outputs")
    os.makedirs(outputs, exist_ok=True)
    inputs = read_call(call_dir)
    try:
        if inputs["form"] == "chain_logits":
            inputs = warp_call(inputs, bug)
        tokens, reported = verify_chain(inputs, bug)
    except Exception as e:  # the verifier raised: the kit counts every request of the call as reported
        with open(os.path.join(outputs, "error.txt"), "w") as f:
            f.write("%s: %s\n" % (type(e).__name__, e))
        return
    write_atomically(os.path.join(outputs, "reported.npy"), reported)
    write_atomically(os.path.join(outputs, "tokens.npy"), tokens)  # last: marks the call answered


def clear(run_dir):
    """Removes what an earlier run left in run_dir (call_<k> directories and reports), nothing else."""
    if not os.path.isdir(run_dir):
        return
    for entry in os.listdir(run_dir):
        path = os.path.join(run_dir, entry)
        if re.fullmatch(r"call_\d{6}", entry) and os.path.isdir(path):
            shutil.rmtree(path)
        elif entry in ("report.json", "report.txt"):
            os.remove(path)


# ---- the driver ---------------------------------------------------------------------------------------


def serve(command, bug, progress):
    """One `specdec-conformance serve` for the run: answers each 'answer <dir>' line with 'done'."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        for line in proc.stdout:
            if line.startswith("answer "):
                call_dir = line[len("answer "):].rstrip("\n")
                answer(call_dir, bug)
                progress(call_dir)
                proc.stdin.write("done\n")
                proc.stdin.flush()
            else:
                sys.stdout.write(line)
    finally:
        proc.stdin.close()  # on an error the CLI sees stdin closed and stops
        code = proc.wait()
    return code


def main():
    parser = argparse.ArgumentParser(
        description="Check a NumPy chain verifier with specdec-conformance. Unknown options are passed to the CLI.",
        allow_abbrev=False)
    parser.add_argument("--cli", required=True, help="the specdec-conformance executable")
    parser.add_argument("--dir", required=True, help="the run's directory")
    parser.add_argument("--mode", choices=("serve", "step"), default="serve",
                        help="one CLI process for the run (serve) or one per call (step)")
    parser.add_argument("--fresh", action="store_true",
                        help="first remove the calls and reports of an earlier run in --dir")
    parser.add_argument("--bug", choices=("shared-seed", "nan-to-zero", "draft-unwarped"),
                        help="make the verifier deliberately wrong")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args, cli_args = parser.parse_known_args()
    check_philox()
    if args.fresh:
        clear(args.dir)
    command = [args.cli, args.mode, "--dir", args.dir] + cli_args
    start, calls = time.monotonic(), 0

    def progress(call_dir):
        nonlocal calls
        calls += 1
        if not args.quiet and calls % 100 == 0:
            print("conformance_numpy.py: %d calls answered (%s), %.1f s" % (calls, os.path.basename(call_dir),
                                                                           time.monotonic() - start), file=sys.stderr)

    try:
        if args.mode == "serve":
            code = serve(command, args.bug, progress)
        else:
            while True:
                proc = subprocess.run(command, stdout=subprocess.PIPE, text=True)
                lines = proc.stdout.splitlines()
                if proc.returncode != 3 or not lines or not lines[-1].startswith("answer "):
                    sys.stdout.write(proc.stdout)
                    code = proc.returncode
                    break
                call_dir = lines[-1][len("answer "):]
                answer(call_dir, args.bug)
                progress(call_dir)
    except UsageError as e:
        print("conformance_numpy.py: %s" % e, file=sys.stderr)
        return 2
    if not args.quiet:
        print("conformance_numpy.py: %d calls answered in %.1f s; specdec-conformance exited with %d"
              % (calls, time.monotonic() - start, code), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

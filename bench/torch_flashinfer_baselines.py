#!/usr/bin/env python3
"""PyTorch and FlashInfer baselines for the specdec GPU benchmarks (issue 9), on the same shapes.

Times, with CUDA events (the median of many runs, L2 flushed before each run unless --no-flush):
  softmax             torch.softmax (and with a per-row temperature), flashinfer.sampling.softmax
                      if present; B = 1, 8, 32, 64, V = 128256
  sample_categorical  torch.multinomial, flashinfer.sampling.sampling_from_probs; B = 1, 32, 64
  top_p_sample        PyTorch sort + cumsum + mask + multinomial (the usual nucleus sampler),
                      flashinfer.sampling.top_p_sampling_from_probs; p = 0.95, B = 1, 32, 64
  chain_verify        the transformers / vLLM-v0 style rejection sampler that materialises the
                      residual max(0, p - q) for every draft position, and
                      flashinfer.sampling.chain_speculative_sampling; gamma = 4, B = 1, 64
Inputs as in bench/cuda_sampling.cu and bench/cuda_verify.cu: fp32 logits ~ N(0, 3^2), probabilities
their softmax (verification: rows of normalised Exp(1) weights), V = 128256.

Prints a CSV table (or --json) with the GPU, driver, torch / CUDA / FlashInfer versions and the date.
With --specdec FILE (Google Benchmark JSON of bench_cuda_sampling / bench_cuda_verify, e.g.
  bench_cuda_sampling --benchmark_format=json > ours.json), adds specdec's median for the same
shape and the speedup of specdec over each baseline.

Needs torch with CUDA; FlashInfer (flashinfer-python) is optional: its rows are skipped without it.
Usage: python3 bench/torch_flashinfer_baselines.py [--runs N] [--json] [--no-flush] [--specdec FILE ...]
"""

import argparse
import datetime
import inspect
import json
import math
import statistics
import sys

VOCAB = 128256
GAMMA = 4


def fail(message):
    print("torch_flashinfer_baselines: " + message, file=sys.stderr)
    sys.exit(2)


try:
    import torch
except ImportError:
    fail("PyTorch is not installed (pip install torch); the baselines need it")
if not torch.cuda.is_available():
    fail("torch.cuda is not available (no CUDA device, or a CPU-only torch build)")

try:
    import flashinfer
    import flashinfer.sampling as fi_sampling
except Exception as exc:  # ImportError, or a wheel built for another torch/CUDA
    flashinfer = None
    fi_sampling = None
    FLASHINFER_ERROR = str(exc)
else:
    FLASHINFER_ERROR = None

DEVICE = torch.device("cuda")


# ---- timing -------------------------------------------------------------------------------------

class Timer:
    """CUDA-event timing of a callable: median (and quartiles) of `runs` runs after a warm-up."""

    def __init__(self, runs, flush):
        self.runs = runs
        # Larger than the L2 of any current GPU (50 MiB on an H100, 126 MiB on a B200).
        self.flush_buffer = torch.empty(256 << 20, dtype=torch.uint8, device=DEVICE) if flush else None

    def __call__(self, fn):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(self.runs):
            if self.flush_buffer is not None:
                self.flush_buffer.zero_()  # before `start`: not timed
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3)  # microseconds
        times.sort()
        return {
            "median_us": statistics.median(times),
            "p25_us": times[len(times) // 4],
            "p75_us": times[(3 * len(times)) // 4],
            "runs": len(times),
        }


# ---- inputs -------------------------------------------------------------------------------------

def gaussian_logits(batch, seed):
    g = torch.Generator(device=DEVICE)
    g.manual_seed(seed)
    return 3.0 * torch.randn(batch, VOCAB, generator=g, device=DEVICE, dtype=torch.float32)


def exp_rows(shape, seed):
    g = torch.Generator(device=DEVICE)
    g.manual_seed(seed)
    w = torch.empty(*shape, VOCAB, device=DEVICE, dtype=torch.float32).exponential_(1.0, generator=g)
    return w / w.sum(dim=-1, keepdim=True)


# ---- PyTorch implementations --------------------------------------------------------------------

def torch_top_p_sample(probs, top_p):
    """Nucleus sampling as most PyTorch serving code writes it: sort, cumulative sum, mask, sample."""
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    outside = (cumulative - sorted_probs) > top_p  # the mass before the token already reaches p
    sorted_probs = sorted_probs.masked_fill(outside, 0.0)
    picked = torch.multinomial(sorted_probs, num_samples=1)  # (normalises internally)
    return torch.gather(order, -1, picked).squeeze(-1)


def torch_chain_verify(draft_probs, draft_ids, target_probs):
    """The vLLM-v0 / transformers rejection sampler: accept with u < min(1, p / q), sample every
    position's residual norm(max(0, p - q)) (materialised, [B, gamma, V]) by the exponential race,
    the bonus token from the last target row; tokens padded with -1 after the first rejection."""
    batch, gamma = draft_ids.shape
    ids = draft_ids.long().unsqueeze(-1)
    p_x = target_probs[:, :gamma].gather(-1, ids).squeeze(-1)
    q_x = draft_probs.gather(-1, ids).squeeze(-1)
    u = torch.rand(batch, gamma, device=draft_probs.device)
    accepted = u < torch.clamp(p_x / q_x, max=1.0)
    residual = torch.clamp(target_probs[:, :gamma] - draft_probs, min=0.0)
    residual = residual / residual.sum(dim=-1, keepdim=True)
    race = torch.empty_like(residual).exponential_(1.0)
    recovered = (residual / race).argmax(dim=-1)
    bonus = torch.multinomial(target_probs[:, gamma], num_samples=1).squeeze(-1)
    # First rejection per request (gamma if none).
    rejected = ~accepted
    first = torch.where(rejected.any(dim=1), rejected.float().argmax(dim=1), torch.full_like(rejected[:, 0], gamma, dtype=torch.long))
    positions = torch.arange(gamma + 1, device=draft_probs.device).unsqueeze(0)
    drafts_padded = torch.cat([draft_ids.long(), torch.zeros(batch, 1, dtype=torch.long, device=draft_probs.device)], dim=1)
    recovered_padded = torch.cat([recovered, bonus.unsqueeze(-1)], dim=1)
    out = torch.where(positions < first.unsqueeze(1), drafts_padded, torch.full_like(drafts_padded, -1))
    at_stop = positions == first.unsqueeze(1)
    out = torch.where(at_stop, recovered_padded, out)
    return out


# ---- FlashInfer, across API versions ------------------------------------------------------------

def _params(fn):
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def flashinfer_softmax():
    fn = getattr(fi_sampling, "softmax", None) if fi_sampling else None
    return fn


def flashinfer_top_p(probs, top_p):
    fn = fi_sampling.top_p_sampling_from_probs
    if "uniform_samples" in _params(fn):  # FlashInfer 0.1.x: (probs, uniform_samples, top_p, ...)
        uniform = torch.rand(32, probs.shape[0], device=probs.device)
        return fn(probs, uniform, top_p)
    return fn(probs, top_p)


def flashinfer_sample(probs):
    fn = fi_sampling.sampling_from_probs
    if "uniform_samples" in _params(fn):
        return fn(probs, torch.rand(probs.shape[0], device=probs.device))
    return fn(probs)


def flashinfer_chain(draft_probs, draft_ids, target_probs):
    fn = fi_sampling.chain_speculative_sampling
    if "uniform_samples" in _params(fn):  # 0.1.x: (draft_probs, draft_token_ids, uniform_samples, target_probs)
        uniform = torch.rand(draft_ids.shape[0], draft_ids.shape[1] + 1, device=draft_probs.device)
        return fn(draft_probs, draft_ids, uniform, target_probs)
    return fn(draft_probs, draft_ids, target_probs)


# ---- the cases ----------------------------------------------------------------------------------

def run_cases(timer):
    rows = []

    def add(op, library, batch, extra, result, required_bytes):
        result.update({"op": op, "library": library, "batch": batch, "vocab": VOCAB, "param": extra,
                       "required_bytes": required_bytes,
                       "gb_per_s": required_bytes / (result["median_us"] * 1e-6) / 1e9})
        rows.append(result)

    fi_softmax = flashinfer_softmax()
    for batch in (1, 8, 32, 64):
        logits = gaussian_logits(batch, 1)
        t = torch.full((batch,), 0.8, device=DEVICE)
        nbytes = 3 * batch * VOCAB * 4
        add("softmax", "torch", batch, "T=1", timer(lambda: torch.softmax(logits, dim=-1)), nbytes)
        add("softmax", "torch", batch, "T per row", timer(lambda: torch.softmax(logits / t.unsqueeze(1), dim=-1)), nbytes)
        if fi_softmax is not None:
            add("softmax", "flashinfer", batch, "T per row", timer(lambda: fi_softmax(logits, temperature=t)), nbytes)

    for batch in (1, 32, 64):
        probs = torch.softmax(gaussian_logits(batch, 2), dim=-1)
        nbytes = batch * VOCAB * 4
        add("sample_categorical", "torch", batch, "", timer(lambda: torch.multinomial(probs, num_samples=1)), nbytes)
        if fi_sampling is not None:
            add("sample_categorical", "flashinfer", batch, "", timer(lambda: flashinfer_sample(probs)), nbytes)
        for p in (0.95,):
            add("top_p_sample", "torch", batch, "p=%g" % p, timer(lambda: torch_top_p_sample(probs, p)), nbytes)
            if fi_sampling is not None:
                add("top_p_sample", "flashinfer", batch, "p=%g" % p, timer(lambda: flashinfer_top_p(probs, p)), nbytes)

    for batch in (1, 64):
        draft = exp_rows((batch, GAMMA), 3)
        target = exp_rows((batch, GAMMA + 1), 4)
        ids = torch.multinomial(draft.reshape(-1, VOCAB), 1).reshape(batch, GAMMA).to(torch.int32)
        # Bytes a verification must read: about one residual row pair per request (the bound the
        # issue states; bench/cuda_verify.cu counts the exact rows of its own run).
        nbytes = 2 * batch * VOCAB * 4
        extra = "gamma=%d" % GAMMA
        add("chain_verify", "torch (vLLM v0 style)", batch, extra, timer(lambda: torch_chain_verify(draft, ids, target)), nbytes)
        if fi_sampling is not None:
            add("chain_verify", "flashinfer", batch, extra, timer(lambda: flashinfer_chain(draft, ids, target)), nbytes)
    return rows


# ---- specdec's own figures (Google Benchmark JSON) ----------------------------------------------

def specdec_medians(paths):
    """Maps (op, batch, param) to specdec's median in microseconds."""
    found = {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            name = b.get("run_name", b.get("name", ""))
            parts = name.split("/")
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}.get(b.get("time_unit", "us"), 1.0)
            t = float(b.get("real_time", math.nan)) * scale
            try:
                if parts[0] == "bm_softmax":
                    key = ("softmax", int(parts[1]), "T=1")  # (per-row temperatures cost the same)
                elif parts[0] == "bm_sample_categorical":
                    key = ("sample_categorical", int(parts[1]), "")
                elif parts[0] == "bm_top_p_sample":
                    key = ("top_p_sample", int(parts[1]), "p=%g" % (int(parts[2]) / 100.0))
                elif parts[0] == "bm_verify" and parts[1] == "strict":
                    key = ("chain_verify", int(parts[2]), "gamma=%d" % GAMMA)
                else:
                    continue
            except (IndexError, ValueError):
                continue
            if b.get("run_type") == "aggregate" or key not in found:
                found[key] = t
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="timed runs per case (default 200)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of CSV")
    parser.add_argument("--no-flush", action="store_true", help="do not flush L2 before each run")
    parser.add_argument("--specdec", nargs="*", default=[], help="Google Benchmark JSON files of specdec's GPU benchmarks")
    args = parser.parse_args()

    props = torch.cuda.get_device_properties(0)
    header = {
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "flashinfer": getattr(flashinfer, "__version__", "present") if flashinfer else "absent (%s)" % FLASHINFER_ERROR,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "runs": args.runs,
        "l2_flush": not args.no_flush,
    }
    if flashinfer is None:
        print("torch_flashinfer_baselines: FlashInfer not importable (%s); its rows are skipped" % FLASHINFER_ERROR,
              file=sys.stderr)
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = run_cases(Timer(args.runs, not args.no_flush))

    ours = specdec_medians(args.specdec) if args.specdec else {}
    for r in rows:
        mine = ours.get((r["op"], r["batch"], r["param"]))
        if mine is None and r["op"] == "softmax":
            mine = ours.get(("softmax", r["batch"], "T=1"))
        r["specdec_median_us"] = mine
        r["specdec_speedup"] = (r["median_us"] / mine) if mine else None

    if args.json:
        print(json.dumps({"machine": header, "rows": rows}, indent=2))
        return
    for k, v in header.items():
        print("# %s: %s" % (k, v))
    columns = ["op", "library", "batch", "vocab", "param", "median_us", "p25_us", "p75_us", "runs", "required_bytes",
               "gb_per_s", "specdec_median_us", "specdec_speedup"]
    print(",".join(columns))
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            if v is None:
                cells.append("")
            elif isinstance(v, float):
                cells.append("%.3f" % v)
            else:
                cells.append(str(v).replace(",", ";"))
        print(",".join(cells))


if __name__ == "__main__":
    main()

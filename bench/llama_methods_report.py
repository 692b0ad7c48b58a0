#!/usr/bin/env python3
"""Summarises bench/llama_methods.sh's runs.csv: one table per (part, model, workload), medians over
the repeats of generation tokens/s, the ratio to target-only decoding of the same run, tokens per
target forward, positions scored per target forward, acceptance, and the split of generation time.

Usage: llama_methods_report.py runs.csv machine.txt > summary.md
Generation excludes each request's first step (prompt processing): its forwards and positions are the
totals minus one forward per request (one for the whole batch in the batch part) and the prompt tokens."""
import csv
import statistics
import sys
from collections import defaultdict


def main() -> None:
    rows = list(csv.DictReader(open(sys.argv[1])))
    machine = open(sys.argv[2]).read().strip()
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(r["part"], r["model"], r["workload"])][r["method"]].append(r)
    print("# Every method on llama.cpp\n")
    print("```\n" + machine + "\n```\n")
    print("Medians over the repeats. tokens/s: generated tokens / generation seconds (prompt processing "
          "excluded); x none: the ratio of the medians to target-only decoding's; x none per run: the median of "
          "each repeat's ratio to target-only decoding in that repeat (steadier on a loaded machine); tok/fwd: generated tokens "
          "per target forward; pos/fwd: positions the target scored per forward (the drafts and the pending "
          "token); split: target forward / drafting / verification, percent of generation time; setup s: "
          "what a method learns or measures on the pair before decoding (SPRINTER's verifier training, SV's "
          "profile), not in tokens/s.\n")
    for (part, model, workload), methods in groups.items():
        print(f"## {part}: {model}, {workload}\n")
        setup_col = any(float(r.get("setup_s") or 0) > 0 for runs in methods.values() for r in runs)
        print("| method | tokens/s | x none | x none per run | tok/fwd | pos/fwd | acceptance | split (target/draft/verify %) |"
              + (" setup s |" if setup_col else ""))
        print("|---|---|---|---|---|---|---|---|" + ("---|" if setup_col else ""))
        base = None
        none_by_repeat = {r["repeat"]: int(r["generated"]) / float(r["gen_seconds"]) for r in methods.get("none", [])}
        for method, runs in methods.items():
            def median(f):
                return statistics.median(f(r) for r in runs)

            def gen_forwards(r):
                first_steps = 1 if r["part"] == "batch" else int(r["requests"])  # a batch's prompts share one step
                return max(1, int(r["target_forwards"]) - first_steps)

            tps = median(lambda r: int(r["generated"]) / float(r["gen_seconds"]))
            if method == "none":
                base = tps
            tok = median(lambda r: int(r["generated"]) / gen_forwards(r))
            pos = median(lambda r: (int(r["positions"]) - int(r["prompt_tokens"])) / gen_forwards(r))
            drafted = median(lambda r: int(r["drafted"]))
            acc = median(lambda r: int(r["accepted"]) / int(r["drafted"]) if int(r["drafted"]) else 0.0)
            split = [median(lambda r, k=k: 100 * float(r[k]) / float(r["gen_seconds"])) for k in ("target_s", "draft_s", "verify_s")]
            ratio = f"{tps / base:.2f}" if base else "-"
            per_run = [int(r["generated"]) / float(r["gen_seconds"]) / none_by_repeat[r["repeat"]]
                       for r in runs if r["repeat"] in none_by_repeat]
            ratio_run = f"{statistics.median(per_run):.2f}" if per_run else "-"
            setup = f" {median(lambda r: float(r.get('setup_s') or 0)):.2f} |" if setup_col else ""
            print(f"| {method} | {tps:.1f} | {ratio} | {ratio_run} | {tok:.2f} | {pos:.2f} | {acc:.3f} ({drafted:.0f} drafted) | "
                  f"{split[0]:.0f} / {split[1]:.0f} / {split[2]:.0f} |{setup}")
        print()


if __name__ == "__main__":
    main()

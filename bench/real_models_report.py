#!/usr/bin/env python3
"""Summarises bench/real_models.sh's runs.csv as Markdown tables: one per target and thread count,
a row per workload, engine, drafter and rule: generation tokens/s (the median of the repeats),
its ratio to specdec's target-only decoding with the same rule, the acceptance of drafted tokens and
the tokens per target forward (specdec's), and specdec's speed over llama-lookup's on the same rule."""
import csv
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
with open(sys.argv[1]) as f:
    for r in csv.DictReader(f):
        runs[(r["model"], r["threads"], r["workload"], r["engine"], r["method"], r["rule"])].append(r)

def median_rate(rows):
    return statistics.median(int(r["generated"]) / float(r["seconds"]) for r in rows if float(r["seconds"]) > 0)

machine = open(sys.argv[2]).read().strip().splitlines() if len(sys.argv) > 2 else []
print("Machine and settings:\n")
for line in machine:
    print(f"    {line}")
print()
names = {"gemma": "Gemma 3 270M Q4_K_M", "smollm2": "SmolLM2 135M Instruct Q4_1"}
for model in dict.fromkeys(k[0] for k in runs):
    for threads in dict.fromkeys(k[1] for k in runs if k[0] == model):
        print(f"### {names.get(model, model)}, {threads} thread(s)\n")
        print("| workload | rule | drafter | tokens/s | x target-only | acceptance | tokens / target forward | x llama-lookup |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for workload in ("grounded", "code", "open"):
            for rule in ("greedy", "sample-and-match"):
                base_key = (model, threads, workload, "specdec", "none", rule)
                if base_key not in runs:
                    continue
                base = median_rate(runs[base_key])
                look_key = (model, threads, workload, "llama-lookup", "ngram", rule)
                look = median_rate(runs[look_key]) if look_key in runs else None
                for engine, method, label in (("specdec", "none", "none (target only)"), ("specdec", "ngram", "specdec n-gram"),
                                              ("specdec", "suffix", "specdec suffix chain"),
                                              ("specdec", "suffix-tree", "specdec suffix tree"),
                                              ("llama-lookup", "ngram", "llama-lookup")):
                    rows = runs.get((model, threads, workload, engine, method, rule))
                    if not rows:
                        continue
                    rate = median_rate(rows)
                    drafted = sum(int(r["drafted"] or 0) for r in rows)
                    accepted = sum(int(r["accepted"] or 0) for r in rows)
                    acc = f"{accepted / drafted:.2f}" if drafted else "-"
                    fwd = sum(int(r["target_forwards"] or 0) for r in rows)
                    gen = sum(int(r["generated"]) for r in rows)
                    per_fwd = f"{gen / fwd:.2f}" if fwd else "-"
                    vs_lookup = f"{rate / look:.2f}" if look and engine == "specdec" and method != "none" else ""
                    print(f"| {workload} | {rule} | {label} | {rate:.1f} | {rate / base:.2f} | {acc} | {per_fwd} | {vs_lookup} |")
        print()

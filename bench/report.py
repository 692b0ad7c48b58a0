#!/usr/bin/env python3
"""Turns the JSON of bench_verify into the markdown tables of bench/README.md (standard library only).

    ./bench_verify --benchmark_out=verify.json --benchmark_out_format=json
    python3 bench/report.py verify.json
"""
import json
import re
import sys


def us(t, unit):
    return t * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[unit]


def fmt_time(t_us):
    return f"{t_us / 1000:.2f} ms" if t_us >= 1000 else f"{t_us:.1f} µs"


def main(path):
    data = json.load(open(path))
    ctx = data["context"]
    rows = {b["name"]: b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"}
    print(f"date {ctx['date']}, DRAM probe in main(): {ctx.get('dram_read_GBps', '?')} GB/s, load average {ctx.get('load_avg')}")
    print(f"naive agreement: {ctx.get('naive_agreement')}")
    print()
    print("| benchmark | size | CPU time | wall time | GB/s | frac of DRAM probe |")
    print("|---|---|---|---|---|---|")
    for name, b in rows.items():
        if name.startswith("BM_read_bandwidth"):
            print(f"| BM_read_bandwidth | {name.split(':')[1]} MB | {fmt_time(us(b['cpu_time'], b['time_unit']))} | "
                  f"{fmt_time(us(b['real_time'], b['time_unit']))} | {b['bytes_per_second'] / 1e9:.1f} | {b['frac_dram_bw']:.2f} |")
    print()
    print("| B | gamma | V | seq CPU time | seq wall | seq GB/s | seq frac DRAM | naive CPU time | naive GB/s (min bytes) "
          "| naive touched/call | seq/naive (CPU time) | mean accepted (seq) | copies | arena |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, s in rows.items():
        m = re.match(r"BM_verify_strict/B:(\d+)/gamma:(\d+)/V:(\d+)$", name)
        if not m:
            continue
        n = rows.get(name.replace("strict", "naive"))
        u = s["time_unit"]
        line = (f"| {m[1]} | {m[2]} | {m[3]} | {fmt_time(us(s['cpu_time'], u))} | {fmt_time(us(s['real_time'], u))} | "
                f"{s['bytes_per_second'] / 1e9:.2f} | {s['frac_dram_bw']:.3f} | ")
        if n:
            line += (f"{fmt_time(us(n['cpu_time'], u))} | {n['bytes_per_second'] / 1e9:.2f} | "
                     f"{n['touched_per_call'] / 1e6:.1f} MB | {n.get('seq_over_naive', float('nan')):.2f} | ")
        else:
            line += "– | – | – | – | "
        line += f"{s['mean_accepted']:.2f} | {int(s['copies'])} | {s['arena_MB']:.0f} MB |"
        print(line)
    print()
    print("| benchmark | V | data | CPU time | wall time | GB/s | frac DRAM |")
    print("|---|---|---|---|---|---|---|")
    for name, b in rows.items():
        m = re.match(r"(BM_(?:residual|bonus)_sample)/V:(\d+)/(\w+)$", name)
        if m:
            where = f"{m[3]} ({int(b['copies'])} pair{'s' if b['copies'] > 1 else ''})"
            print(f"| {m[1]} | {m[2]} | {where} | {fmt_time(us(b['cpu_time'], b['time_unit']))} | "
                  f"{fmt_time(us(b['real_time'], b['time_unit']))} | {b['bytes_per_second'] / 1e9:.2f} | {b['frac_dram_bw']:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "verify.json")

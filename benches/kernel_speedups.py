#!/usr/bin/env python3
"""Per-kernel speedup of each SIMD family over the scalar twin, from criterion's results.

Run the kernel benchmarks first, then this script (from the repository root):

    cargo bench -p tessera-kernels
    python3 benches/kernel_speedups.py [--size 1M] [--criterion-dir target/criterion]

Prints a Markdown table: per kernel, the median time per batch of each family and its
speedup over `scalar` (scalar median / family median), read from
target/criterion/<group>/<kernel>_<family>/<size>/new/{benchmark,estimates}.json.
Families missing on this CPU are left blank. Medians come from one criterion run; on a
shared machine compare ratios, not absolute times.
"""
import argparse
import json
import pathlib
import sys


def fmt_time(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1M", help="batch size label (64K or 1M)")
    ap.add_argument("--criterion-dir", default="target/criterion", type=pathlib.Path)
    args = ap.parse_args()
    rows = {}  # kernel -> family -> median ns
    order = []
    for bench in sorted(args.criterion_dir.glob(f"*/*/{args.size}/new/benchmark.json")):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        kernel, _, family = meta["function_id"].rpartition("/")
        if kernel not in rows:
            order.append(kernel)
        rows.setdefault(kernel, {})[family] = est["median"]["point_estimate"]
    if not rows:
        sys.exit(f"no criterion results for size {args.size} under {args.criterion_dir}: run cargo bench -p tessera-kernels")
    families = [f for f in ("scalar", "portable", "avx2", "avx512", "neon", "sve") if any(f in r for r in rows.values())]
    print(f"| kernel ({args.size} rows) | " + " | ".join(families) + " | " +
          " | ".join(f"{f} speedup" for f in families if f != "scalar") + " |")
    print("|---|" + "---:|" * (2 * len(families) - 1))
    for k in order:
        r = rows[k]
        times = [fmt_time(r[f]) if f in r else "" for f in families]
        speed = [f"{r['scalar'] / r[f]:.1f}x" if f in r and "scalar" in r else "" for f in families if f != "scalar"]
        print(f"| `{k}` | " + " | ".join(times) + " | " + " | ".join(speed) + " |")


if __name__ == "__main__":
    main()

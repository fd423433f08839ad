#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turn sockbuf_bench_api JSON (--benchmark_out) into the "Call costs" table.

Usage: bench_api_table.py RESULT.json
Prints one Markdown row per public call: API and raw median CPU time with
min-max and stddev over the repetitions, and the ratio of the medians.
"""
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    data = json.load(open(sys.argv[1]))
    agg = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "aggregate":
            continue
        agg.setdefault(b["run_name"], {})[b["aggregate_name"]] = b["cpu_time"]
    print("| call | API median ns (min-max, sd) | raw median ns (min-max, sd) "
          "| API/raw (medians) | API/raw range |")
    print("|---|---|---|---|---|")
    for call in ("set_initial", "lock", "get_state", "check_floor"):
        a = agg.get(f"BM_{call}_api")
        r = agg.get(f"BM_{call}_raw")
        if not a or not r:
            continue

        def cell(x):
            return (f"{x['median']:.0f} ({x['min']:.0f}-{x['max']:.0f}, "
                    f"sd {x['stddev']:.0f})")
        ratio = a["median"] / r["median"]
        low = a["min"] / r["max"]
        high = a["max"] / r["min"]
        print(f"| {call} | {cell(a)} | {cell(r)} | {ratio:.3f} "
              f"| {low:.2f}-{high:.2f} |")
    ctx = data.get("context", {})
    print(f"\n{ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz, "
          f"Google Benchmark library build {ctx.get('library_build_type')}, date {ctx.get('date')}")


if __name__ == "__main__":
    main()

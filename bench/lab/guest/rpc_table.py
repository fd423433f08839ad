#!/usr/bin/env python3
"""Markdown tables from the consoles of rpc_netem.sh and rpc_many.sh runs.

  bench/lab/guest/rpc_table.py NAME=CONSOLE [NAME=CONSOLE ...]

NAME labels the kernel of each console (the --log file of run.py)."""
import json
import re
import sys

LINE = re.compile(r'@@ (rpc|many) rtt=(\d+) bufs=(\w+)(?: clients=\d+)? (?:server="[^"]*" )?(\{.*\})')


def read(path):
    out = []
    with open(path, errors="replace") as f:
        for ln in f:
            m = LINE.search(ln)
            if m:
                try:
                    out.append((m.group(1), int(m.group(2)), m.group(3), json.loads(m.group(4))))
                except ValueError:
                    out.append((m.group(1), int(m.group(2)), m.group(3), {"error": "unreadable"}))
    return out


def cell(r):
    if r.get("error"):
        return "error: %s" % r["error"][:40]
    return "%.1f MB/s, p99 %.0f ms" % (r["MBps"], r["p99_us"] / 1e3)


def main(argv):
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        sys.exit(__doc__)
    rpc, many = [], []
    for arg in argv[1:]:
        name, path = arg.split("=", 1)
        for kind, rtt, bufs, r in read(path):
            (rpc if kind == "rpc" else many).append((name, rtt, bufs, r))
    if rpc:
        print("| kernel | RTT | default | 16 MB locked | 16 MB initial, unlocked |")
        print("|---|---|---|---|---|")
        keys = sorted({(n, t) for n, t, _, _ in rpc}, key=lambda k: ([n for n, *_ in rpc].index(k[0]), k[1]))
        for n, t in keys:
            row = {b: r for nn, tt, b, r in rpc if (nn, tt) == (n, t)}
            print("| %s | %d ms | %s |" % (n, t, " | ".join(
                cell(row[b]) if b in row else "-" for b in ("default", "lock", "initial"))))
    if many:
        if rpc:
            print()
        print("| kernel | server | clients' MB/s (sum) | p99 median / worst | bystander | "
              "peak TCP memory | memory pressure entries |")
        print("|---|---|---|---|---|---|---|")
        for n, t, b, r in many:
            # A median p99 of 0: most clients completed no call at all.
            med = r.get("p99_us_median", 0)
            print("| %s | %s | %.1f | %s / %.0f ms | %.2f MB/s, p99 %.0f ms | %d pages | %d |" % (
                n, b, r.get("sum_MBps", 0), "%.0f" % (med / 1e3) if med else "none",
                r.get("p99_us_worst", 0) / 1e3, r.get("bystander_MBps", 0),
                r.get("bystander_p99_us", 0) / 1e3, r.get("tcp_mem_peak_pages", 0),
                r.get("memory_pressures", 0)))


if __name__ == "__main__":
    main(sys.argv)

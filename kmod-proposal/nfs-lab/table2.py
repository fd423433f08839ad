#!/usr/bin/env python3
"""table2.py OUT: the two-guest NFS table from twoguest.sh's result lines.

Reads OUT/<arm>-<round>.txt ("@@ nfs2 arm=A rtt=R op=O rc=N bytes=B
secs=S MBps=M tb=.. w=.. rb=.. r=.."), keeps the transfers that moved
all their bytes with rc=0, and prints one Markdown table per operation:
a row per RTT, a column per arm, each cell "median (min-max, n)" in
MB/s and, after a semicolon, the server's largest send (read) or
receive (write) buffer / queued memory in MiB. A transfer that failed
is counted in a "failed" note, never averaged in.
"""
import collections
import pathlib
import re
import statistics
import sys


def parse(out):
    rows = collections.defaultdict(list)
    failed = collections.Counter()
    arms = []
    for f in sorted(pathlib.Path(out).glob("*-*.txt")):
        if f.name in ("arms.txt", "load.txt"):
            continue
        for line in f.read_text().splitlines():
            if not line.startswith("@@ nfs2 "):
                continue
            kv = dict(re.findall(r"(\w+)=(\S+)", line))
            key = (kv["arm"], int(kv["rtt"]), kv["op"])
            if kv["arm"] not in arms:
                arms.append(kv["arm"])
            if kv.get("rc") != "0" or float(kv.get("MBps", 0)) <= 0:
                failed[key] += 1
                continue
            rows[key].append(kv)
    return rows, failed, arms


def cell(samples, op):
    if not samples:
        return "-"
    mbps = [float(s["MBps"]) for s in samples]
    buf, q = ("tb", "w") if op == "read" else ("rb", "r")
    mib = lambda k: max(int(s.get(k, 0)) for s in samples) / 1048576
    return (f"{statistics.median(mbps):.1f} ({min(mbps):.1f}-{max(mbps):.1f}, "
            f"{len(mbps)}); {mib(buf):.1f} / {mib(q):.1f}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows, failed, arms = parse(sys.argv[1])
    if not arms:
        sys.exit(f"table2: no result lines in {sys.argv[1]}")
    rtts = sorted({k[1] for k in rows} | {k[1] for k in failed})
    for op in ("read", "write"):
        print(f"\n{op}, MB/s median (min-max, n); server buffer / queued, MiB\n")
        print("| RTT ms | " + " | ".join(arms) + " |")
        print("|---:|" + "---|" * len(arms))
        for rtt in rtts:
            print(f"| {rtt} | " + " | ".join(cell(rows[(a, rtt, op)], op) for a in arms) + " |")
    if failed:
        print("\nfailed transfers (not in the table): " +
              ", ".join(f"{a} {r} ms {o}: {n}" for (a, r, o), n in sorted(failed.items())))


if __name__ == "__main__":
    main()

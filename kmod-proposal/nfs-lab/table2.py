#!/usr/bin/env python3
"""table2.py [--cover] OUT: the two-guest NFS table from twoguest.sh's result lines.

Reads OUT/<arm>-<round>.txt ("@@ nfs2 arm=A rtt=R op=O rc=N bytes=B
secs=S MBps=M tb=.. w=.. rb=.. r=.."), keeps the transfers that moved
all their bytes with rc=0, and prints one Markdown table per operation:
a row per RTT (with the ping the client measured on the path before
each mount, median (min-max) over the kept pairs), a column per arm,
each cell "median (min-max, n)" in
MB/s and, after a semicolon, the server's largest send (read) or
receive (write) buffer / queued memory in MiB. A transfer that failed
is counted in a "failed" note, never averaged in.

--cover prints the same medians as plain text for a cover letter (a
row per arm, a column per RTT, "median (min-max)" in MB/s, n in the
last line, per arm when the arms differ and for every cell that differs
from its arm's); arms of up to 8 characters, at most 78 columns.
kmod-proposal/check.sh finds each block verbatim in the covers.
"""
import collections
import pathlib
import re
import statistics
import sys


def result_files(out):
    """OUT/<arm>-<round>.txt, one guest pair's result lines each (arms.txt
    and load.txt have no dash)."""
    return sorted(pathlib.Path(out).glob("*-*.txt"))


def spread(values, compact=False, n=False):
    """ "median (min-max)", or "median (min-max, n)"; compact writes a
    min or max of 100 or more without decimals (the covers' columns)."""
    num = lambda v: f"{v:.0f}" if compact and v >= 100 else f"{v:.1f}"
    count = f", {len(values)}" if n else ""
    return f"{statistics.median(values):.1f} ({num(min(values))}-{num(max(values))}{count})"


def parse(out):
    rows = collections.defaultdict(list)
    failed = collections.Counter()
    arms = []
    for f in result_files(out):
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
    # The lab's arms in the order the docs name them, others after.
    known = ["stock", "locked", "net", "series"]
    arms.sort(key=lambda a: (known.index(a) if a in known else len(known), a))
    return rows, failed, arms


def pings(out):
    """Per RTT, the client's measured ping averages (its "@@ path" lines),
    from the pairs whose result lines were kept."""
    got = collections.defaultdict(list)
    for f in result_files(out):
        log = f.with_name(f.stem + "-client.log")
        if not log.exists():
            continue
        for rtt, ms in re.findall(r"@@ path rtt=(\d+) ping_avg_ms=([\d.]+)",
                                  log.read_text(errors="replace")):
            got[int(rtt)].append(float(ms))
    return got


def cell(samples, op):
    if not samples:
        return "-"
    mbps = [float(s["MBps"]) for s in samples]
    buf, q = ("tb", "w") if op == "read" else ("rb", "r")
    mib = lambda k: max(int(s.get(k, 0)) for s in samples) / 1048576
    return f"{spread(mbps, n=True)}; {mib(buf):.1f} / {mib(q):.1f}"


def cover(rows, failed, arms, rtts):
    """The plain-text blocks: one per operation, a row per arm; n in the
    last line (per arm when the arms differ, and every cell that differs
    from its arm's)."""
    n_of = {a: statistics.mode(len(rows[(a, r, o)]) for r in rtts for o in ("read", "write"))
            for a in arms}
    odd = []
    for op in ("read", "write"):
        # The label may run into the first column's blank padding.
        label, head = f"  NFS {op}", " " * 10 + "".join(f"{f'{r} ms':>17}" for r in rtts)
        print(label + head[len(label):])
        for a in arms:
            cells = []
            for r in rtts:
                mbps = [float(s["MBps"]) for s in rows[(a, r, op)]]
                cells.append(f"{spread(mbps, compact=True) if mbps else '-':>17}")
                if len(mbps) != n_of[a]:
                    odd.append(f"{a} {op} {r} ms n={len(mbps)}")
            print(f"  {a:<8}" + "".join(cells))
        print()
    ns = set(n_of.values())
    print("  MB/s, median (min-max) of " +
          (f"n={ns.pop()}" if len(ns) == 1 else ", ".join(f"{a} n={n}" for a, n in n_of.items())) +
          "".join(f"; {o}" for o in odd) +
          (f"; failed transfers left out: {sum(failed.values())}" if failed else ""))


def main():
    args = sys.argv[1:]
    as_cover = args[:1] == ["--cover"]
    args = args[1:] if as_cover else args
    if len(args) != 1 or args[0].startswith("-"):
        sys.exit(__doc__)
    if not pathlib.Path(args[0]).is_dir():
        sys.exit(f"table2: {args[0]}: not a directory")
    rows, failed, arms = parse(args[0])
    if not arms:
        sys.exit(f"table2: no result lines in {args[0]}")
    rtts = sorted({k[1] for k in rows} | {k[1] for k in failed})
    if as_cover:
        cover(rows, failed, arms, rtts)
        return
    ping = pings(args[0])
    for op in ("read", "write"):
        print(f"\n{op}, MB/s median (min-max, n); server buffer / queued, MiB\n")
        print("| RTT ms | ping ms | " + " | ".join(arms) + " |")
        print("|---:|---|" + "---|" * len(arms))
        for rtt in rtts:
            measured = spread(ping[rtt]) if ping[rtt] else "-"
            print(f"| {rtt} | {measured} | " +
                  " | ".join(cell(rows[(a, rtt, op)], op) for a in arms) + " |")
    if failed:
        print("\nfailed transfers (not in the table): " +
              ", ".join(f"{a} {r} ms {o}: {n}" for (a, r, o), n in sorted(failed.items())))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""nfs-lab/table.py OUT: the NFS experiment's table from run.sh's result
lines (OUT/<arm>-<round>.txt): per operation and RTT, each arm's median
throughput with its range over the rounds, and the server sockets'
largest send buffer (tb) and queued send memory (w) for reads, receive
buffer (rb) and queued receive memory (r) for writes (medians over the
rounds of each round's largest sample). Markdown on stdout; a transfer
that failed (rc != 0) is counted and left out of the figures. With
lab_mode=pressure results, also the pressure table: the read's and the
bystander's throughput, the kernel's TCP memory and NFSD's queued send
memory, medians with ranges."""
import collections
import glob
import os
import statistics
import sys

ARMS = ["stock", "locked", "series"]


def fields(line):
    """The KEY=VALUE words of a result line ("@@ nfs arm=stock rtt=0 ...")."""
    return dict(w.split("=", 1) for w in line[3:].split()[1:] if "=" in w)


def parse(out):
    rows, failed, press = [], collections.Counter(), []
    for path in sorted(glob.glob(os.path.join(out, "*.txt"))):
        if os.path.basename(path) == "runs.txt":
            continue
        for line in open(path, errors="replace"):
            if line.startswith("@@ pressure arm="):
                f = fields(line)
                if f.get("read_rc") != "0" or f.get("by_rc") != "0":
                    failed[(f.get("arm"), "pressure", f.get("rtt"))] += 1
                    continue
                press.append(f)
                continue
            if not line.startswith("@@ nfs arm="):
                continue
            f = fields(line)
            if f.get("rc") != "0" or float(f.get("secs", 0)) <= 0:
                failed[(f.get("arm"), f.get("op"), f.get("rtt"))] += 1
                continue
            rows.append(f)
    return rows, failed, press


def spread(vals, fmt="%.1f"):
    return (fmt + " (" + fmt + "-" + fmt + ", %d)") % (
        statistics.median(vals), min(vals), max(vals), len(vals))


def pressure_table(press):
    arms = [a for a in ARMS if any(p["arm"] == a for p in press)] + sorted(
        {p["arm"] for p in press} - set(ARMS))
    print("\npressure: median (min-max, n)\n")
    print("| arm | NFS read MB/s | bystander MB/s | TCP memory, largest MiB | NFSD queued send, largest MiB "
          "| memory pressure entries |")
    print("|---|---|---|---|---|---|")
    for arm in arms:
        ps = [p for p in press if p["arm"] == arm]
        print("| %s | %s | %s | %s | %s | %s |" % (
            arm, spread([float(p["nfs_MBps"]) for p in ps]), spread([float(p["by_MBps"]) for p in ps]),
            spread([int(p["tcpmem_max"]) * 4096 / 1048576.0 for p in ps]),
            spread([int(p["srv_w_sum_max"]) / 1048576.0 for p in ps]),
            spread([int(p["pressures"]) for p in ps], "%d")))


def mib(v):
    return "%.1f" % (v / 1048576.0)


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: table.py OUT")
    rows, failed, press = parse(sys.argv[1])
    if not rows:
        raise SystemExit("table: no result lines in %s" % sys.argv[1])
    by = collections.defaultdict(list)
    for f in rows:
        by[(f["op"], int(f["rtt"]), f["arm"])].append(f)
    arms = [a for a in ARMS if any(k[2] == a for k in by)] + sorted(
        {k[2] for k in by} - set(ARMS))
    for op, mem in (("read", ("tb", "w")), ("write", ("rb", "r"))):
        print("\n%s, MB/s median (min-max, n); server socket %s / %s MiB (medians of each run's largest)\n"
              % (op, mem[0], mem[1]))
        print("| RTT ms | " + " | ".join(arms) + " |")
        print("|---:|" + "---|" * len(arms))
        for rtt in sorted({k[1] for k in by if k[0] == op}):
            cells = []
            for arm in arms:
                runs = by.get((op, rtt, arm), [])
                if not runs:
                    cells.append("-")
                    continue
                v = [float(r["MBps"]) for r in runs]
                m0 = statistics.median(int(r[mem[0]]) for r in runs)
                m1 = statistics.median(int(r[mem[1]]) for r in runs)
                cells.append("%.1f (%.1f-%.1f, %d); %s / %s" % (
                    statistics.median(v), min(v), max(v), len(v), mib(m0), mib(m1)))
            print("| %d | %s |" % (rtt, " | ".join(cells)))
    if press:
        pressure_table(press)
    if failed:
        print("\nfailed transfers (left out): " + ", ".join(
            "%s %s %s ms x%d" % (a, o, r, n) for (a, o, r), n in sorted(failed.items())))


if __name__ == "__main__":
    main()

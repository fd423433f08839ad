#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plots and summary tables from the lab's CSV (run by run_lab.py).

    bench/lab/plot_lab.py --results docs/results/perf --plots docs/plots

Writes throughput_vs_rtt_{rpc,rr}.png, bufsize_over_time_rpc.png and
docs/results/perf/lab_summary.md (median and min-max per cell, the seed
reproductions).  A difference whose min-max ranges overlap is reported as
noise.
"""
import argparse
import csv
import glob
import json
import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {  # (bufs, size_label) -> colour, line style, label
    ("default", "-"): ("tab:blue", "-", "default (kernel sizes)"),
    ("initial", "old"): ("tab:green", "-", "initial, old size"),
    ("lock", "old"): ("tab:red", "-", "lock, old size"),
    ("initial", "large"): ("tab:green", "--", "initial, large size"),
    ("lock", "large"): ("tab:red", "--", "lock, large size"),
    ("raw", "old"): ("tab:olive", ":", "raw SO_*BUF + SO_BUF_LOCK 0, old size"),
    ("initial-force", "2bdp"): ("tab:purple", "-", "initial-force, 2 x BDP"),
    ("lock", "2bdp"): ("tab:brown", "-.", "lock, 2 x BDP"),
}


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def cells(rows, experiment):
    out = {}
    for r in rows:
        if r["experiment"] != experiment or r["error"]:
            continue
        key = (r["transport"], float(r["rtt_ms"]), r["bufs"], r["size_label"], r["variant"])
        out.setdefault(key, {"MBps": [], "ops": [], "p99": []})
        out[key]["MBps"].append(float(r["MBps"]))
        out[key]["ops"].append(float(r["ops_per_s"]))
        out[key]["p99"].append(float(r["p99_us"]))
    return out


def stat(v):
    return statistics.median(v), min(v), max(v), len(v)


def fmt(v, unit=""):
    m, lo, hi, n = stat(v)
    digits = 1 if m >= 10 else 2 if m >= 1 else 3
    return f"{m:.{digits}f}{unit} ({lo:.{digits}f}-{hi:.{digits}f}, n={n})"


def overlap(a, b):
    return min(a) <= max(b) and min(b) <= max(a)


def plot_throughput(c, transport, path, source):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (bufs, size), (colour, ls, label) in STYLE.items():
        pts = sorted((k[1], stat(v["MBps"])) for k, v in c.items()
                     if k[0] == transport and k[2] == bufs and k[3] == size and not k[4])
        if not pts:
            continue
        x = [p[0] for p in pts]
        med = [p[1][0] for p in pts]
        err = [[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]]
        ax.errorbar(x, med, yerr=err, color=colour, ls=ls, marker="o", capsize=3,
                    label=label)
    ax.set_yscale("log")
    ax.set_xlabel("RTT (ms)")
    ax.set_ylabel("throughput, MB/s (log)" if transport == "rpc"
                  else "payload both ways, MB/s (log)")
    title = {"rpc": "rpc: 32 KB writes, 128 slots, one connection",
             "rr": "rr: 16 connections, 100 KB request + 100 KB reply"}[transport]
    ax.set_title(f"{title}\nmedian, bars min-max; RTT: {source}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_traces(results, path):
    files = sorted(glob.glob(os.path.join(results, "trace_rpc_rtt*_*.csv")))
    if not files:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = {"default": "tab:blue", "initial": "tab:green", "lock": "tab:red"}
    rtt = ""
    for f in files:
        bufs = os.path.basename(f).rsplit("_", 1)[1][:-4]
        rtt = os.path.basename(f).split("_")[2][3:]
        t, rcv, snd = [], [], []
        for r in load(f):
            if r["conn"] != "0":
                continue
            t.append(float(r["t_ms"]) / 1000)
            rcv.append(int(r["rcvbuf"]) / 1024)
            snd.append(int(r["sndbuf"]) / 1024)
        if not t:
            continue
        t0 = t[0]
        ax.step([x - t0 for x in t], rcv, where="post", color=colours.get(bufs, "k"),
                label=f"{bufs}: server rcvbuf")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since accept")
    ax.set_ylabel("SO_RCVBUF of the accepted socket, KB (log)")
    ax.set_title(f"rpc server receive buffer over one connection, {rtt} ms RTT\n"
                 "old size (3 x 36 KB); sampled every 5 ms with sockbuf_get_state()",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def sweep_table(c, transport, unit_key="MBps"):
    rtts = sorted({k[1] for k in c if k[0] == transport})
    lines = ["| bufs, size | " + " | ".join(f"{r:g} ms" for r in rtts) + " |",
             "|---|" + "---|" * len(rtts)]
    for (bufs, size), (_, _, label) in STYLE.items():
        cellsrow = []
        for r in rtts:
            v = c.get((transport, r, bufs, size, ""))
            cellsrow.append(fmt(v[unit_key]) if v else "")
        if any(cellsrow):
            lines.append(f"| {label} | " + " | ".join(cellsrow) + " |")
    return "\n".join(lines)


def ratio_text(a, b):
    """Median ratio a/b with the worst-case range."""
    ma, mb = statistics.median(a), statistics.median(b)
    return f"{ma / mb:.1f}x (range {min(a) / max(b):.1f}-{max(a) / min(b):.1f}x)"


def seeds(c):
    out = ["## Seed reproductions", ""]
    g = lambda t, r, b, s, metric="MBps": c.get((t, r, b, s, ""), {}).get(metric)
    lock, init, dflt = g("rpc", 120.0, "lock", "old"), g("rpc", 120.0, "initial", "old"), \
        g("rpc", 120.0, "default", "-")
    if lock and init and dflt:
        out += ["### NFS 2008: 120 ms RTT, locked svcsock-style buffers vs initial", "",
                "| | historical | here (median, min-max, MB/s) |", "|---|---|---|",
                f"| lock, old size | 432 KB/s | {fmt(lock)} |",
                f"| initial, old size | 15,859 KB/s | {fmt(init)} |",
                f"| default | - | {fmt(dflt)} |",
                f"| initial / lock | 36.7x (target >= 30x) | {ratio_text(init, lock)} |",
                f"| initial / default | - (target >= 95 %) | "
                f"{100 * statistics.median(init) / statistics.median(dflt):.0f} % "
                f"({'inside' if overlap(init, dflt) else 'outside'} the spread) |", ""]
    rows = []
    for rtt in (0.0, 1.0, 10.0):
        d, lk, ini = g("rr", rtt, "default", "-"), g("rr", rtt, "lock", "old"), \
            g("rr", rtt, "initial", "old")
        if not (d and lk and ini):
            continue
        gb = lambda v: [x * 8 / 1000 for x in v]
        rows.append(f"| {rtt:g} ms | {fmt(gb(d), ' Gb/s')} | {fmt(gb(lk), ' Gb/s')} | "
                    f"{fmt(gb(ini), ' Gb/s')} | {ratio_text(d, lk)} | "
                    f"{ratio_text(ini, lk)}; vs default: "
                    f"{'noise' if overlap(ini, d) else ratio_text(ini, d)} |")
    if rows:
        out += ["### RDS 2015: locked 128 KB vs defaults, 16 threads, 100 KB messages", "",
                "Historical: locked 2-3 Gb/s, defaults 6-8 Gb/s (real NIC).  Gb/s counts "
                "payload both ways.", "",
                "| RTT | default | lock 128 KB | initial 128 KB | default / lock | "
                "initial / lock; initial vs default |", "|---|---|---|---|---|---|"] + rows + [""]
    m = {k[4]: v for k, v in c.items() if k[0] == "rpc" and k[4].startswith("marker=")}
    if m:
        base = m.get("marker=separate")
        out += ["### SUNRPC record marker and TCP_CORK (rpc, 8 KB READs, 128 slots, "
                "no delay)", "", "Historical: \"in the noise\".", "",
                "| variant | ops/s (median, min-max) | p99 latency us (median) | "
                "vs marker=separate |", "|---|---|---|---|"]
        for k in sorted(m):
            v = m[k]
            cmp = ""
            if base and k != "marker=separate":
                d = statistics.median(v["ops"]) / statistics.median(base["ops"]) - 1
                cmp = (f"{100 * d:+.1f} %, "
                       f"{'inside the spread: noise' if overlap(v['ops'], base['ops']) else 'outside the spread'}")
            out.append(f"| {k} | {fmt(v['ops'])} | {statistics.median(v['p99']):.0f} | {cmp} |")
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--plots", required=True)
    args = ap.parse_args()
    os.makedirs(args.plots, exist_ok=True)
    rows = load(os.path.join(args.results, "lab.csv"))
    meta = {}
    meta_path = os.path.join(args.results, "lab_meta.json")
    if os.path.exists(meta_path):
        meta = json.load(open(meta_path))
    source = meta.get("source", "see CSV")
    c = cells(rows, "sweep")
    c.update(cells(rows, "marker"))
    for t in ("rpc", "rr"):
        if any(k[0] == t for k in c):
            plot_throughput(c, t, os.path.join(args.plots, f"throughput_vs_rtt_{t}.png"),
                            source)
    plot_traces(args.results, os.path.join(args.plots, "bufsize_over_time_rpc.png"))
    errors = [r for r in rows if r["error"]]
    md = ["# Lab summary (generated by bench/lab/plot_lab.py)", "",
          f"Command: `{meta.get('command', '?')}`  ",
          f"RTT source: {source}; kernel {meta.get('kernel', '?')}, "
          f"{meta.get('tcp_congestion_control', '?')}, tcp_rmem {meta.get('tcp_rmem', '?')}, "
          f"tcp_wmem {meta.get('tcp_wmem', '?')}, rmem_max {meta.get('rmem_max', '?')}; "
          f"{meta.get('cpus', '?')} CPUs, load average {meta.get('loadavg_start', '?')} at "
          f"the start and {meta.get('loadavg_end', '?')} at the end (1, 5, 15 min); "
          f"{meta.get('started', '?')} to {meta.get('finished', '?')}.  ",
          f"Runs with errors (left out): {len(errors)}.", "",
          "## rpc throughput, MB/s (median (min-max, n))", "", sweep_table(c, "rpc"), "",
          "## rr throughput, MB/s of payload both ways (median (min-max, n))", "",
          sweep_table(c, "rr"), "",
          "## rr p99 latency, us (median (min-max, n))", "", sweep_table(c, "rr", "p99"), "",
          seeds(c)]
    with open(os.path.join(args.results, "lab_summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The send buffer over time under a memory cgroup limit, one kernel, one
panel per mode (raw SO_*BUF + SO_BUF_LOCK 0, set_initial + floor guard,
set_initial + SOCKBUF_F_RESERVE_MEM, lock), the floor drawn in.

    tests/kernels/plot_floor.py --results docs/results/kernels --plots docs/plots 6.12 7.x

Reads the pressure-memcg section of each kernel's result (written by
tests/kernels/run-matrix; every arm ran the same transfer under the same
memory.max squeeze) and writes docs/plots/floor_<kernel>.png.  The series
holds a point every 100 ms and at every change in between, at the guest
sampler's resolution (its largest gap is printed in each panel's title).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ARMS = [("raw", "raw: SO_SNDBUF, then SO_BUF_LOCK 0", "tab:red"),
        ("guard", "set_initial + floor guard (10 ms)", "tab:green"),
        ("reserve", "set_initial + SOCKBUF_F_RESERVE_MEM", "tab:blue"),
        ("lock", "lock (autotuning off)", "tab:gray")]


def runs_by_arm(result):
    sec = result.get("sections", {}).get("pressure-memcg", {})
    runs = sec.get("runs", []) if isinstance(sec, dict) else []
    return {r["arm"]: r for r in runs if "arm" in r and "sender" in r}


def lowest(series, t0):
    vals = [v for t, v, _ in series if t >= t0]
    return min(vals) if vals else None


def plot(name, result, out):
    runs = runs_by_arm(result)
    if not all(a in runs for a, _, _ in ARMS):
        missing = [a for a, _, _ in ARMS if a not in runs]
        print("%s: no memcg run for %s: skipped" % (name, ", ".join(missing)), file=sys.stderr)
        return False
    fig, axes = plt.subplots(len(ARMS), 1, figsize=(8, 9), sharex=True, sharey=True)
    for ax, (arm, label, colour) in zip(axes, ARMS):
        sd = runs[arm]["sender"]
        series = sd.get("series_ms_snd_rcv", [])
        floor = sd["floor"]["snd"]
        t = [p[0] / 1000.0 for p in series]
        kib = [p[1] / 1024.0 for p in series]
        ax.step(t, kib, where="post", color=colour, linewidth=1.6, zorder=3, label="send buffer")
        ax.axhline(floor / 1024.0, color="black", linestyle="--", linewidth=1, zorder=2,
                   label="floor %d KiB" % (floor // 1024))
        low = sd["min"]["sndbuf"]
        below = sd.get("below_floor_ms", {}).get("snd", 0)
        ax.set_title("%s: lowest %.1f KiB, below the floor at most %d ms "
                     "(samples up to %s ms apart)" % (
                         label, low / 1024.0, below, sd.get("max_sample_gap_ms", "?")),
                     fontsize=9)
        ax.set_yscale("log")
        ax.set_ylabel("KiB")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    axes[-1].set_xlabel("seconds since the transfer started")
    rel = result.get("release", name)
    fig.suptitle("Send buffer under a memory.max squeeze, Linux %s" % rel, fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    print("wrote %s" % out)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="docs/results/kernels")
    ap.add_argument("--plots", default="docs/plots")
    ap.add_argument("kernels", nargs="+", help="result names, e.g. 6.12 7.x")
    args = ap.parse_args()
    ok = True
    for k in args.kernels:
        path = os.path.join(args.results, "%s.json" % k)
        try:
            with open(path) as f:
                result = json.load(f)
        except (OSError, ValueError) as e:
            print("%s: %s" % (path, e), file=sys.stderr)
            ok = False
            continue
        ok &= plot(k, result, os.path.join(args.plots, "floor_%s.png" % k))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The sockbuf performance lab: one command, CSV and plots out.

    sudo bench/lab/run_lab.py --bin build-perf/bin [--runs 5] [--rtts 0,10,50,120,250]

Two network namespaces joined by a veth pair (netns.sh); RTT from the
NFQUEUE receive-side delay line (sockbuf-delayline, half the RTT on the
arrival side of each namespace).  For each RTT every configuration of both
example transports runs once per round, rounds repeated --runs times, so
configurations alternate (A B C ... A B C ...) and machine noise hits them
alike.  tcp_metrics are flushed in both namespaces before every run.
Writes docs/results/perf/lab.csv, buffer traces, lab_meta.json, and then
runs plot_lab.py for the plots and the summary tables.

Configurations per transport and RTT: default (kernel sizes); initial and
lock at the old size and at the large size; raw (the initial-size recipe
by hand: SO_SNDBUF/SO_RCVBUF, then SO_BUF_LOCK 0, no library) at the old
size; and at 2 x BDP (--bdp-rate x RTT, at least 1 MiB), past
net.core.[wr]mem_max and tcp_[wr]mem[2] at long RTTs: initial-force
(set_initial with SOCKBUF_F_ALLOW_FORCE, autotuning kept on) and lock
(forced too).
At 2 x BDP both ends are sized (for rpc the client too: on writes it is
the sender).
"""
import argparse
import csv
import json
import os
import platform
import select
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PREFIX = "sbb-lab"  # --prefix and --net change these (two labs side by side)
NET = "198.18.30"
NS_A, NS_B = f"{PREFIX}-a", f"{PREFIX}-b"
SERVER_ADDR = f"{NET}.1"
SOURCE = "nfqueue-receive-delay (this host, veth)"

# Buffer sizes in the library's unit (what getsockopt reads back).
# rpc "old": svc_tcp's 3 requests x sv_max_mesg of a 32 KB NFS payload plus
# a page (36 KB); rr "old": RDS_TCP_DEFAULT_BUFSIZE, 128 KB.
# The rpc server is given them as --requests x --max-msg.
RPC_SERVER = {"old": ("3", "36K"), "large": ("4", "1M")}
SIZES = {
    "rpc": {"old": 3 * 36 * 1024, "large": 4 * 1024 * 1024},
    "rr": {"old": 128 * 1024, "large": 4 * 1024 * 1024},
}
RUN_SECONDS = {"rpc": 3, "rr": 3}
# 2 x BDP sizes: a link rate (MB/s) times the RTT, twice, rounded up to
# 64 KiB, at least 1 MiB, at most SOCKBUF_SIZE_MAX.
BDP_MIN = 1 << 20
SOCKBUF_SIZE_MAX = 0x7FFFFFFF // 2


def two_bdp(rtt_ms, rate_mbps):
    size = int(2 * rate_mbps * 1e6 * rtt_ms / 1000)
    size = max(BDP_MIN, (size + 65535) // 65536 * 65536)
    return min(size, SOCKBUF_SIZE_MAX & ~1)

FIELDS = ["timestamp", "source", "experiment", "rtt_ms", "transport", "bufs",
          "size_label", "bufsize", "variant", "run", "MBps", "ops_per_s",
          "p50_us", "p99_us", "ops", "bad", "seconds", "error", "server_bufs"]


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def in_ns(ns, *args):
    return ["ip", "netns", "exec", ns, *args]


class lab:
    def __init__(self, bindir, out_dir):
        self.bin = bindir
        self.out_dir = out_dir
        self.delaylines = []
        self.port = 20000

    def up(self):
        sh(os.path.join(HERE, "netns.sh"), "down", PREFIX, check=False)
        sh(os.path.join(HERE, "netns.sh"), "up", PREFIX, NET)

    def down(self):
        self.stop_delay()
        sh(os.path.join(HERE, "netns.sh"), "down", PREFIX, check=False)

    def start_delay(self, rtt_ms):
        self.stop_delay()
        if rtt_ms <= 0:
            return
        half_us = int(rtt_ms * 1000 / 2)
        for ns in (NS_A, NS_B):
            p = subprocess.Popen(in_ns(ns, os.path.join(self.bin, "sockbuf-delayline"),
                                       f"--delay-us={half_us}", "--seconds=7200"),
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True)
            line = p.stdout.readline()  # printed once the queue is bound
            if "delay" not in line:
                raise RuntimeError(f"delay line did not start in {ns}")
            self.delaylines.append(p)

    def stop_delay(self):
        for p in self.delaylines:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.delaylines = []

    def flush_metrics(self):
        for ns in (NS_A, NS_B):
            sh(*in_ns(ns, "ip", "tcp_metrics", "flush"), check=False)

    def run_one(self, cfg, seconds, trace=None):
        """One client/server session; returns the client's JSON (or an error)."""
        self.flush_metrics()
        self.port += 1
        t = cfg["transport"]
        # "initial-force" is set_initial with SOCKBUF_F_ALLOW_FORCE; lock at
        # 2 x BDP forces too (SOCKBUF_STRAT_FORCE_LOCK), else *mem_max cuts it.
        force = cfg["bufs"] == "initial-force" or cfg["size_label"] == "2bdp"
        bufs = "initial" if cfg["bufs"] == "initial-force" else cfg["bufs"]
        sizing = [f"--bufs={bufs}"] + (["--force"] if force else [])
        server = [os.path.join(self.bin, f"{t}-server"),
                  f"--listen={SERVER_ADDR}:{self.port}", *sizing,
                  f"--seconds={seconds + 60}"]
        client = [os.path.join(self.bin, f"{t}-client"),
                  f"--connect={SERVER_ADDR}:{self.port}", f"--seconds={seconds}", "--json"]
        if t == "rpc" and cfg["size_label"] == "2bdp":
            # Both ends at 2 x BDP: the client sends the writes.
            server += [f"--bufsize={cfg['bufsize']}", "--max-clients=1", "--threads=4"]
            client += [f"--op={cfg.get('op', 'write')}", f"--size={cfg.get('msg', '32K')}",
                       "--slots=128", "--bytes=4G", *sizing, f"--bufsize={cfg['bufsize']}"]
        elif t == "rpc":
            # requests x max message, as svc_sock_setbufsize sized it.
            req, msg = RPC_SERVER["large" if cfg["size_label"] == "large" else "old"]
            server += [f"--requests={req}", f"--max-msg={msg}", "--max-clients=1",
                       "--threads=4"]
            # NFS-era 32 KB writes; 128 slots keep 4 MB in flight, more
            # than tcp_wmem[2] lets an unlocked sender have outstanding.
            client += [f"--op={cfg.get('op', 'write')}", f"--size={cfg.get('msg', '32K')}",
                       "--slots=128", "--bytes=4G"]
            for flag in cfg.get("extra", []):
                server.append(flag)
                client.append(flag)
        else:
            server += [f"--bufsize={cfg['bufsize']}", "--max-clients=16"]
            client += ["--threads=16", "--size=100K", "--depth=1", "--bytes=8G",
                       *sizing, f"--bufsize={cfg['bufsize']}"]
        if trace:
            server.append(f"--trace={trace}")
        srv = subprocess.Popen(in_ns(NS_A, *server), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            ready, _, _ = select.select([srv.stdout], [], [], 10)
            note = srv.stdout.readline().strip() if ready else ""
            if "listening" not in note:
                raise RuntimeError(f"server did not start: {note} {srv.stderr.read()}")
            try:
                cl = subprocess.run(in_ns(NS_B, *client), capture_output=True, text=True,
                                    timeout=seconds + 30)
            except subprocess.TimeoutExpired:
                # Recorded as a failed run; the sweep goes on.
                return {"error": f"client still running after {seconds + 30} s",
                        "server_bufs": note.split(" ", 4)[-1]}
            srv.wait(timeout=30)
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
        try:
            result = json.loads(cl.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            result = {"error": f"client exit {cl.returncode}: {cl.stderr.strip()[:200]}"}
        if srv.returncode != 0 and not result.get("error"):
            result["error"] = f"server exit {srv.returncode}"
        result["server_bufs"] = note.split(" ", 4)[-1] if note else ""
        return result


def configs_for(rtt, transports, rate_mbps):
    out = []
    for t in transports:
        out.append({"transport": t, "bufs": "default", "size_label": "-",
                    "bufsize": SIZES[t]["old"], "experiment": "sweep"})
        for label in ("old", "large"):
            for bufs in ("initial", "lock"):
                out.append({"transport": t, "bufs": bufs, "size_label": label,
                            "bufsize": SIZES[t][label], "experiment": "sweep"})
        out.append({"transport": t, "bufs": "raw", "size_label": "old",
                    "bufsize": SIZES[t]["old"], "experiment": "sweep"})
        for bufs in ("initial-force", "lock"):
            out.append({"transport": t, "bufs": bufs, "size_label": "2bdp",
                        "bufsize": two_bdp(rtt, rate_mbps), "experiment": "sweep"})
    return out


def rds_1ms_configs():
    return [{"transport": "rr", "bufs": b, "size_label": "old" if b != "default" else "-",
             "bufsize": SIZES["rr"]["old"], "experiment": "sweep"}
            for b in ("default", "initial", "lock")]


def marker_configs():
    out = []
    for marker in ("separate", "combined"):
        for cork in (False, True):
            extra = [f"--marker={marker}"] + (["--cork"] if cork else [])
            out.append({"transport": "rpc", "bufs": "default", "size_label": "-",
                        "bufsize": SIZES["rpc"]["old"], "experiment": "marker",
                        "op": "read", "msg": "8K", "extra": extra,
                        "variant": f"marker={marker}{' cork' if cork else ''}"})
    return out


def row(cfg, rtt, run, res):
    ops = res.get("calls", res.get("requests", 0))
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"), "source": SOURCE,
        "experiment": cfg["experiment"], "rtt_ms": rtt, "transport": cfg["transport"],
        "bufs": cfg["bufs"], "size_label": cfg["size_label"], "bufsize": cfg["bufsize"],
        "variant": cfg.get("variant", ""), "run": run,
        "MBps": round(res.get("MBps", 0.0), 3),
        "ops_per_s": round(res.get("iops", res.get("rps", 0.0)), 1),
        "p50_us": round(res.get("p50_us", 0.0)), "p99_us": round(res.get("p99_us", 0.0)),
        "ops": ops, "bad": res.get("bad_replies", ""), "seconds": round(res.get("seconds", 0), 2),
        "error": res.get("error", ""), "server_bufs": res.get("server_bufs", ""),
    }


def main():
    global PREFIX, NET, NS_A, NS_B, SERVER_ADDR
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="directory with the built programs")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rtts", default="0,10,50,120,250", help="RTTs in ms for the sweep")
    ap.add_argument("--bdp-rate", type=float, default=100,
                    help="link rate in MB/s for the 2 x BDP sizes (default 100)")
    ap.add_argument("--run-seconds", type=float, default=None,
                    help="seconds per run (default: rpc %d, rr %d)" % (RUN_SECONDS["rpc"],
                                                                    RUN_SECONDS["rr"]))
    ap.add_argument("--rds-rtts", default="1", help="extra RTTs for the rr 128 KB seed")
    ap.add_argument("--transports", default="rpc,rr")
    ap.add_argument("--trace-rtt", type=float, default=50)
    ap.add_argument("--no-marker", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "perf"))
    ap.add_argument("--plots", default=os.path.join(ROOT, "docs", "plots"))
    ap.add_argument("--prefix", default=PREFIX, help="network namespace name prefix")
    ap.add_argument("--net", default=NET, help="first three octets, inside 198.18.0.0/15")
    args = ap.parse_args()
    PREFIX, NET = args.prefix, args.net
    NS_A, NS_B, SERVER_ADDR = f"{PREFIX}-a", f"{PREFIX}-b", f"{NET}.1"
    if os.geteuid() != 0:
        sys.exit("run_lab.py: needs root for network namespaces and NFQUEUE")
    bindir = os.path.abspath(args.bin)
    for prog in ("sockbuf-delayline", "rpc-server", "rpc-client", "rr-server", "rr-client"):
        if not os.access(os.path.join(bindir, prog), os.X_OK):
            sys.exit(f"run_lab.py: {prog} not built in {bindir}")
    os.makedirs(args.out, exist_ok=True)
    transports = args.transports.split(",")
    rtts = [float(x) for x in args.rtts.split(",") if x]
    if args.run_seconds:
        for t in RUN_SECONDS:
            RUN_SECONDS[t] = args.run_seconds
    plan = [(r, configs_for(r, transports, args.bdp_rate)) for r in rtts]
    if "rr" in transports:
        plan += [(float(r), rds_1ms_configs()) for r in args.rds_rtts.split(",") if r]
    if not args.no_marker and "rpc" in transports:
        plan.insert(0, (0.0, marker_configs()))

    L = lab(bindir, args.out)
    meta = {"command": " ".join(sys.argv), "source": SOURCE, "kernel": platform.release(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": args.runs,
            "run_seconds": RUN_SECONDS, "sizes": SIZES, "bdp_rate_MBps": args.bdp_rate,
            "two_bdp": {f"{r:g}": two_bdp(r, args.bdp_rate) for r in rtts},
            "cpus": os.cpu_count(),
            # A benchmark needs the machine to itself: what else ran shows here.
            "loadavg_start": "%.2f %.2f %.2f" % os.getloadavg()}
    csv_path = os.path.join(args.out, "lab.csv")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        L.up()
        meta["tcp_congestion_control"] = sh(*in_ns(NS_A, "sysctl", "-n",
                                               "net.ipv4.tcp_congestion_control")).stdout.strip()
        meta["tcp_rmem"] = sh(*in_ns(NS_A, "sysctl", "-n", "net.ipv4.tcp_rmem")).stdout.strip()
        meta["tcp_wmem"] = sh(*in_ns(NS_A, "sysctl", "-n", "net.ipv4.tcp_wmem")).stdout.strip()
        meta["rmem_max"] = open("/proc/sys/net/core/rmem_max").read().strip()
        meta["wmem_max"] = open("/proc/sys/net/core/wmem_max").read().strip()
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            for rtt, cfgs in plan:
                L.start_delay(rtt)
                for run in range(1, args.runs + 1):
                    for cfg in cfgs:
                        trace = None
                        if (run == 1 and rtt == args.trace_rtt and cfg["transport"] == "rpc"
                                and cfg["size_label"] in ("old", "-")):
                            trace = os.path.join(
                                args.out, f"trace_rpc_rtt{int(rtt)}_{cfg['bufs']}.csv")
                        res = L.run_one(cfg, RUN_SECONDS[cfg["transport"]], trace)
                        r = row(cfg, rtt, run, res)
                        w.writerow(r)
                        f.flush()
                        print(f"rtt {rtt:g} {cfg['transport']} {cfg['bufs']} "
                              f"{cfg['size_label']} {cfg.get('variant', '')} run {run}: "
                              f"{r['MBps']} MB/s {r['ops_per_s']} ops/s {r['error']}",
                              flush=True)
    finally:
        L.down()
        meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        meta["loadavg_end"] = "%.2f %.2f %.2f" % os.getloadavg()
        with open(os.path.join(args.out, "lab_meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "plot_lab.py"), "--results",
                    args.out, "--plots", args.plots], check=True)


if __name__ == "__main__":
    main()

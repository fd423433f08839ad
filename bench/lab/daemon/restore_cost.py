#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What one restore costs sockbufd, natively, in polling mode.

A process run as nobody under `sockbuf run --policy initial` holds PAIRS
loopback connections (bench/lab/daemon/holder.py: every end floored at
131072 and published); sockbufd (--events off, --interval INTERVAL_MS)
serves them in a network namespace made here.  Each round cuts every
socket from outside (pidfd_getfd, SO_RCVBUF 4096, SO_BUF_LOCK 0: what
the kernel's moderation leaves), waits until the daemon has raised each
back (bounded), and reads the daemon's CPU (utime + stime) and its
sockbuf_restores_total.  Idle rounds (nothing cut, the same wall time)
give what the passes alone cost; the difference per restore is printed
per round, then the median and range.  The daemon's presence file is in
a directory of the script's own (SOCKBUF_DAEMON_DIR).

usage: [SOCKBUFD=PATH] restore_cost.py BUILD_DIR [PAIRS=1000] [ROUNDS=5] [INTERVAL_MS=1000]
(SOCKBUFD: another daemon binary than BUILD_DIR's, e.g. one built before a change)
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "daemon"))
from daemon_lab import AS_NOBODY, SERVER_PYTHON, Daemon, metric, rp, until  # noqa: E402

FLOOR = 131072
CUT = 4096
PORT = 5631


def cpu_s(pid):
    """Time on a CPU of every thread of @pid (schedstat: nanoseconds)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


def socket_fds(pid):
    fds = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                fds.append(int(name))
        except OSError:
            pass
    return fds


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = sys.argv[1]
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    interval = sys.argv[4] if len(sys.argv) > 4 else "1000"
    if os.getuid() != 0:
        print("restore_cost: needs root (network namespace)", file=sys.stderr)
        return 2
    ns = f"sbd-rc-{os.getpid()}"
    tmp = tempfile.mkdtemp()
    os.chmod(tmp, 0o755)
    run = os.path.join(tmp, "run")
    os.mkdir(run, 0o755)
    env = dict(os.environ, SOCKBUF_DAEMON_DIR=run)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    procs = []
    daemon = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        holder = subprocess.Popen(
            ["ip", "netns", "exec", ns, *AS_NOBODY, os.path.join(build, "bin", "sockbuf"), "run",
             "-q", "--via", "preload", "--policy", "initial", "--", SERVER_PYTHON,
             os.path.join(HERE, "holder.py"), str(pairs), str(PORT)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        procs.append(holder)
        ready = holder.stdout.readline().strip()
        if not ready.startswith("ready"):
            raise SystemExit(f"holder: {ready!r}")
        daemon = Daemon(ns, os.environ.get("SOCKBUFD", os.path.join(build, "bin", "sockbufd")),
                        tmp, 0, args=("--events", "off", "--interval", interval), env=env)
        prom = daemon.metrics
        want = 2 * pairs
        got = until(lambda: (metric(prom, "sockbuf_guarded_sockets") or 0) >= want, 30)
        if not got:
            raise SystemExit(f"daemon guards {metric(prom, 'sockbuf_guarded_sockets')} of {want}")
        dups = []
        for fd in socket_fds(holder.pid):
            s = rp.dup_of(holder.pid, fd)
            if s is None:
                continue
            if s.type == socket.SOCK_STREAM and rp.rcvbuf(s) >= FLOOR:
                try:
                    s.getpeername()
                    dups.append(s)
                    continue
                except OSError:
                    pass
            s.close()
        dpid = daemon.proc.pid
        print(f"restore_cost: {len(dups)} connected sockets of {holder.pid}, daemon "
              f"{dpid} --interval {interval}; load {os.getloadavg()}", flush=True)
        per = []
        for r in range(rounds):
            # An idle stretch as long as the last cut round: the passes alone.
            c0, r0, t0 = cpu_s(dpid), metric(prom, "sockbuf_restores_total") or 0, \
                time.monotonic()
            for s in dups:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CUT)
                s.setsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK, 0)
            back = until(lambda: all(rp.rcvbuf(s) >= FLOOR for s in dups), 30)
            wall = time.monotonic() - t0
            c1 = cpu_s(dpid)
            time.sleep(wall)
            c2 = cpu_s(dpid)
            until(lambda: (metric(prom, "sockbuf_restores_total") or 0) >= r0 + len(dups), 3)
            n = (metric(prom, "sockbuf_restores_total") or 0) - r0
            us = ((c1 - c0) - (c2 - c1)) / max(n, 1) * 1e6
            per.append(us)
            print(f"round {r + 1}: {'all back' if back else 'NOT all back'} in {wall:.2f} s, "
                  f"{n:.0f} restores, daemon CPU {c1 - c0:.3f} s (idle {c2 - c1:.3f} s): "
                  f"{us:.1f} us per restore", flush=True)
        print(f"per restore: median {statistics.median(per):.1f} us "
              f"(min {min(per):.1f}, max {max(per):.1f}, n={len(per)}); "
              f"load {os.getloadavg()}")
    finally:
        if daemon:
            daemon.end(signal.SIGTERM)
        # Asked to end, not killed: a process killed leaves its floor
        # table in /dev/shm.
        for p in procs:
            rp.stop(p, ask=rp.say_done)
        subprocess.run(["ip", "netns", "del", ns])
        subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""iperf3's server under `sockbuf run --via seccomp --floor-guard 10`: its
data connection must get its listener's floor.

With a client asking `-w 256K`, iperf3's server makes a second listener on
its port, sizes it (SO_SNDBUF and SO_RCVBUF 262144: floors 524288),
accepts the data connection and closes that listener within milliseconds,
before a guard pass can see it listening.  The supervisor learns the
listener's port when it calls listen() and looks for its connections at the
pass after its close.  Checked, between two network namespaces joined by a
veth pair (198.18.20.0/24), while the client sends for 4 s:

  - `sockbuf show --json` of the server lists its data connection (the one
    that received more than 1 MiB) with floor snd and rcv 524288 "from its
    listener";
  - the control connection, accepted on the same port before that listener
    listened, has no floor, nor has the unsized listener iperf3 makes again
    on the port (bound, it waits in its trapped listen() during a pass);
  - the supervisor's summary counts exactly 1 accepted socket given its
    listener's floor;
  - client and server exit 0.

usage: iperf3_seccomp.py --sockbuf PATH
Exit: 0 pass, 1 fail, 77 skip (not root, no ip/iperf3, no netns, no
supervisor).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_programs as rp  # noqa: E402

PORT = 5211
SECONDS = 4
FLOOR = 524288  # -w 256K: setsockopt(262144), stored doubled


def program_pid(sup):
    """The supervised program: the supervisor's first child (or None)."""
    try:
        with open(f"/proc/{sup.pid}/task/{sup.pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except OSError:
        return None


def on_port(j):
    """The server's established connections on PORT."""
    return [s for s in (j or {}).get("sockets", [])
            if s["state"] == "ESTABLISHED" and s["local"].endswith(f":{PORT}")]


def run_once(ns, sockbuf, log):
    label = "iperf3 -s under --via seccomp"
    ns.flush_metrics()
    server = subprocess.Popen(
        ["ip", "netns", "exec", ns.srv, sockbuf, "run", "--via", "seccomp", "--policy",
         "initial", "--floor-guard", "10", "--log", log, "--", "iperf3", "-s", "-1", "-B",
         rp.SRV_ADDR, "-p", str(PORT)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = None
    try:
        deadline = time.monotonic() + 10
        pid = None
        while pid is None and time.monotonic() < deadline and server.poll() is None:
            pid = program_pid(server)
            if pid is None:
                time.sleep(0.02)
        ready = pid is not None and rp.wait_listening(sockbuf, pid, PORT, server, deadline)
        rp.check(ready, f"{label}: server listening (pid {pid})")
        if not ready:
            return
        client = subprocess.Popen(
            ["ip", "netns", "exec", ns.cli, "iperf3", "-c", rp.SRV_ADDR, "-p", str(PORT),
             "-w", "256K", "-t", str(SECONDS)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        data = control = None
        stray = {}
        end = time.monotonic() + SECONDS + 10
        # Every 50 ms while the client sends.
        while client.poll() is None and time.monotonic() < end:
            j = rp.show(sockbuf, pid)
            d = rp.data_socket(j, PORT, True)
            if d is not None and (data is None or "floor" not in data):
                data = d
            for s in (j or {}).get("sockets", []):
                if s["local"].endswith(f":{PORT}") and "floor" in s:
                    stray[(s["fd"], s["state"], s["remote"])] = s["floor"]
            if d is not None:
                others = [s for s in on_port(j) if s["fd"] != d["fd"]]
                control = others[0] if others else control
            time.sleep(0.05)
        if data is not None:
            stray.pop((data["fd"], data["state"], data["remote"]), None)
        floor = (data or {}).get("floor", {})
        rp.check(data is not None, f"{label}: data connection seen in sockbuf show")
        rp.check(floor.get("snd") == FLOOR and floor.get("rcv") == FLOOR and
                 "from its listener" in floor.get("by", ""),
                 f"{label}: data connection has its listener's floor ({floor or 'none'})")
        rp.check(control is not None and "floor" not in control,
                 f"{label}: control connection (accepted before that listener "
                 f"listened) has no floor ({control and control.get('floor')})")
        rp.check(not stray, f"{label}: no other socket on port {PORT} has a floor "
                 f"(the unsized listener iperf3 makes again) ({stray or 'none'})")
        out, _ = client.communicate(timeout=SECONDS + 15)
        rp.check(client.returncode == 0,
                 f"{label}: client exit {client.returncode} {out[-300:] if client.returncode else ''}")
        sout, _ = server.communicate(timeout=15)
        rp.check(server.returncode == 0 and client.returncode == 0,
                 f"{label}: server exit {server.returncode} "
                 f"{sout[-400:] if server.returncode or client.returncode else ''}")
        with open(log) as f:
            text = f.read()
        m = re.search(r"(\d+) accepted sockets given their listener's floor", text)
        rp.check(m is not None and m.group(1) == "1",
                 f"{label}: summary counts 1 accepted socket given its listener's floor "
                 f"({m.group(0) if m else 'no summary line'})")
    finally:
        for p in (client, server):
            if p is not None:
                rp.stop(p, ask=lambda p: p.terminate())


def main():
    args = rp.root_args()
    if args is None:
        return rp.SKIP
    for tool in ("ip", "iperf3"):
        if not shutil.which(tool):
            return rp.skip(f"{tool} not installed")
    why = rp.seccomp_missing(args.sockbuf)
    if why:
        return rp.skip(why)

    def body(ns):
        with tempfile.TemporaryDirectory() as tmp:
            run_once(ns, args.sockbuf, os.path.join(tmp, "run.log"))
        return rp.verdict()

    return rp.in_namespaces(body)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A server that sizes its listener, not its connections (the common way:
nginx `listen ... rcvbuf=`, rsync, Python servers): the accepted
connection inherits the listener's sizes, and under `sockbuf run
--policy initial --floor-guard MS` it must inherit the listener's floor
too, through the preload shim (at accept()) and through the seccomp
supervisor (which does not trap accept(): it finds the connection by its
listener's port).

py_listener.py (SO_RCVBUF 64K on its listener, floor rcv 131072) accepts
one connection from the client namespace and receives 1 MB.  Then, per
mode: `sockbuf show --json` lists the connection with floor rcv 131072
"from its listener"; the test cuts the connection's receive buffer to
8192 and unlocks it from outside (pidfd_getfd, as the kernel's moderation
leaves a buffer) and the guard must raise it back to 131072 or more
within 3 s (the guard runs every 100 ms).  A plain run gets no floor.

usage: listener_floors.py --sockbuf PATH
Exit: 0 pass, 1 fail, 77 skip (not root, no netns, no supervisor).
"""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_programs as rp  # noqa: E402

PORT = 5601
BYTES = 1 << 20
FLOOR = 131072
CUT = 4096  # stored as 8192
GUARD_MS = 100


def entry_within(sockbuf, pid, fd, pred, seconds):
    """The `sockbuf show` entry of @fd once @pred holds for it (or the last
    one seen, or None), waiting at most @seconds."""
    end = time.monotonic() + seconds
    last = None
    while True:
        j = rp.show(sockbuf, pid)
        last = next((s for s in (j or {}).get("sockets", []) if s["fd"] == fd), last)
        if (last is not None and pred(last)) or time.monotonic() >= end:
            return last
        time.sleep(0.05)


def one_mode(ns, sockbuf, via):
    label = f"listener floor, {via}"
    here = os.path.dirname(os.path.abspath(__file__))
    argv = [sys.executable, os.path.join(here, "py_listener.py"), rp.SRV_ADDR, str(PORT),
            str(BYTES)]
    if via != "plain":
        argv = [sockbuf, "run", "-q", "--via", via, "--policy", "initial", "--floor-guard",
                str(GUARD_MS), "--"] + argv
    ns.flush_metrics()
    srv = subprocess.Popen(["ip", "netns", "exec", ns.srv] + argv, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        first = srv.stdout.readline().strip()
        rp.check(first == "listening readback=131072", f"{label}: {first!r}")
        sender = rp.send_zeros(ns, PORT, BYTES)
        line = srv.stdout.readline().strip()
        rp.check(sender.returncode == 0 and line.startswith(f"received {BYTES} fd="),
                 f"{label}: transfer ({line!r}, sender exit {sender.returncode})")
        if "fd=" not in line:
            return
        fd = int(line.split("fd=")[1])
        # The preload path executes the program in place; the supervisor
        # has it as its child.
        pid = srv.pid
        if via == "seccomp":
            with open(f"/proc/{srv.pid}/task/{srv.pid}/children") as f:
                pid = int(f.read().split()[0])
        if via == "plain":
            e = entry_within(sockbuf, pid, fd, lambda e: True, 0)
            rp.check(e is not None and "floor" not in e,
                     f"{label}: the connection has no floor ({e and e.get('floor')})")
            return
        e = entry_within(sockbuf, pid, fd, lambda e: "floor" in e, 3)
        floor = (e or {}).get("floor", {})
        rp.check(floor.get("rcv") == FLOOR and "from its listener" in floor.get("by", ""),
                 f"{label}: show lists the connection's floor ({floor})")
        s = rp.dup_of(pid, fd)
        rp.check(s is not None, f"{label}: pidfd_getfd of fd {fd}")
        if s is None:
            return
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CUT)
            s.setsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK, 0)
            cut = rp.rcvbuf(s)
            end = time.monotonic() + 3
            while rp.rcvbuf(s) < FLOOR and time.monotonic() < end:
                time.sleep(0.02)
            after = rp.rcvbuf(s)
            rp.check(cut == 2 * CUT and after >= FLOOR,
                     f"{label}: cut to {cut} unlocked, back to {after} (want >= {FLOOR}) "
                     "within 3 s")
        finally:
            s.close()  # our duplicate only
    finally:
        rp.stop(srv, ask=rp.say_done)


def main():
    args = rp.root_args()
    if args is None:
        return rp.SKIP
    modes = rp.ways(args.sockbuf, "listener floor")

    def body(ns):
        for via in modes:
            one_mode(ns, args.sockbuf, via)
        return rp.verdict()

    return rp.in_namespaces(body)


if __name__ == "__main__":
    sys.exit(main())

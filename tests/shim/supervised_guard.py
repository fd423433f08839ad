#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The seccomp supervisor's floor guard on a static program
(programs/guardserver.c: a loopback connection whose SO_SNDBUF it sets to
64K, floor 131072), under `sockbuf run --via seccomp --floor-guard 5`:

- the floor is published for the program: `sockbuf show --json PID` gives
  it (by "guard+shim"; "shim" without --floor-guard);
- a cut made behind the program's back (this script takes the socket with
  pidfd_getfd() and sets SO_SNDBUF 4096: 8192, locked) is restored to the
  floor, unlocked, within 2 s; without --floor-guard it stays cut (300 ms);
- the program closes the socket and a new one takes its fd number while
  the old socket lives on (this script holds a copy) below its floor: both
  are cut to 8192 and neither is written in 300 ms (60 passes), with the
  supervisor's /proc check, and again with that check skipped
  (SOCKBUF_RUN_FAULT=guard_no_precheck) so that only the cookie check at
  the write stands between the old floor and the new socket;
- the supervisor holds no copy of the socket: once the program and this
  script have closed it, the peer reads end of file;
- the summary line counts the restore and the reused number, and the
  table published for the program goes when the run ends.

usage: supervised_guard.py --sockbuf PATH --server PATH
Exit: 0 pass, 1 fail, 77 skip (no seccomp supervisor, no SO_BUF_LOCK).
"""
import argparse
import ctypes
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_programs as rp  # noqa: E402
from real_programs import SO_BUF_LOCK, SYS_PIDFD_GETFD, check, libc  # noqa: E402

FLOOR = 131072


def take(pid, fd):
    """A copy of fd @fd of process @pid (pidfd_getfd), as a socket object."""
    pidfd = os.pidfd_open(pid)
    try:
        dup = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
    finally:
        os.close(pidfd)
    if dup < 0:
        raise OSError(ctypes.get_errno(), f"pidfd_getfd {pid} {fd}")
    return socket.socket(fileno=dup)


def sndbuf(s):
    return s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


def cut(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    return sndbuf(s)


def wait_restored(s, limit):
    """Polls @s's send buffer for @limit seconds; its last size."""
    end = time.monotonic() + limit
    now = sndbuf(s)
    while now < FLOOR and time.monotonic() < end:
        time.sleep(0.001)
        now = sndbuf(s)
    return now


def show_floor(sockbuf, pid, fd):
    r = subprocess.run([sockbuf, "show", "--json", str(pid)], capture_output=True, text=True,
                       timeout=30)
    if r.returncode not in (0, 3):
        return None
    s = next((s for s in json.loads(r.stdout).get("sockets", []) if s["fd"] == fd), None)
    return s and s.get("floor")


def one_run(args, guard, fault=None):
    label = ("guarded" if guard else "unguarded") + (f", {fault}" if fault else "")
    argv = [args.sockbuf, "run", "--via", "seccomp", "--log", "stderr"]
    if guard:
        argv += ["--floor-guard", "5"]
    env = dict(os.environ)
    env.pop("SOCKBUF_RUN_FAULT", None)
    if fault:
        env["SOCKBUF_RUN_FAULT"] = fault
    p = subprocess.Popen(argv + ["--", args.server], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    held = []
    pid = fd = None
    try:
        m = re.match(r"ready pid=(\d+) fd=(\d+)", p.stdout.readline())
        check(m is not None, f"{label}: the program started")
        if not m:
            return
        pid, fd = int(m.group(1)), int(m.group(2))
        fl = show_floor(args.sockbuf, pid, fd)
        want_by = "guard+shim" if guard else "shim"
        check(fl is not None and fl["snd"] == FLOOR and fl["by"] == want_by,
              f"{label}: show gives fd {fd} the floor {FLOOR} by {want_by} ({fl})")

        a = take(pid, fd)
        held.append(a)
        check(cut(a) == 8192 and a.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK) & 1,
              f"{label}: cut behind the program's back to 8192, locked")
        now = wait_restored(a, 2.0 if guard else 0.3)
        lock = a.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK)
        if guard:
            check(now >= FLOOR and lock == 0,
                  f"{label}: restored to {now} (floor {FLOOR}), lock bits {lock}")
        else:
            check(now == 8192, f"{label}: without --floor-guard it stays at {now}")
        if not guard:
            return

        # The number is reused while the old socket lives on (held here).
        p.stdin.write("reuse\n")
        p.stdin.flush()
        m = re.match(r"reused fd=(\d+)", p.stdout.readline())
        check(m is not None and int(m.group(1)) == fd,
              f"{label}: a new socket took fd {fd} ({m and m.group(0)})")
        if not m:
            return
        b = take(pid, fd)
        held.append(b)
        check(cut(a) == 8192 and cut(b) == 8192,
              f"{label}: old socket (held here) and new one both cut to 8192")
        time.sleep(0.3)  # 60 passes: the check is that nothing happens
        check(sndbuf(b) == 8192 and b.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK) & 1,
              f"{label}: the new socket on fd {fd} was never written "
              f"({sndbuf(b)}, lock {b.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK)})")
        check(sndbuf(a) == 8192,
              f"{label}: the old socket, no longer the program's, was not written either "
              f"({sndbuf(a)})")
        fl = show_floor(args.sockbuf, pid, fd)
        check(fl is None, f"{label}: show gives the new socket no floor ({fl})")
    finally:
        for s in held:
            s.close()
        if p.poll() is None:
            p.stdin.write("quit\n")
            p.stdin.flush()
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        err = p.stderr.read()
        check(rc == 0, f"{label}: exit {rc}")
        if guard:
            m = re.search(r"floor guard: (\d+) passes, (\d+) below, (\d+) restored, "
                          r"(\d+) closed, (\d+) numbers reused", err)
            check(m is not None and int(m.group(3)) >= 1 and int(m.group(5)) == 1,
                  f"{label}: summary counts the restore and the reused number "
                  f"({m and m.group(0)})")
            check(f"fd {fd} below its floor, restored: snd 8192 -> {FLOOR}" in err,
                  f"{label}: a line for the restore")
        if pid:
            left = [f for f in os.listdir("/dev/shm") if f.startswith(f"sockbuf-floors.{pid}.")]
            check(not left, f"{label}: the published table went with the run ({left})")


def no_copy_held(args):
    """The supervisor keeps no copy: the peer sees EOF once the program
    closed its socket (with --floor-guard, after passes have run)."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    code = ("import socket,sys,time; s=socket.socket();"
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536);"
            f"s.connect(('127.0.0.1', {port})); print('up', flush=True);"
            "sys.stdin.readline(); s.close(); print('closed', flush=True); sys.stdin.readline()")
    p = subprocess.Popen([args.sockbuf, "run", "--via", "seccomp", "--floor-guard", "5", "-q",
                          "--", sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        c, _ = lst.accept()
        c.settimeout(5)
        check(p.stdout.readline().strip() == "up", "no copy: the program connected")
        time.sleep(0.05)  # passes run meanwhile; nothing to wait for
        p.stdin.write("\n")
        p.stdin.flush()
        check(p.stdout.readline().strip() == "closed", "no copy: the program closed it")
        try:
            eof = c.recv(1) == b""
        except socket.timeout:
            eof = False
        check(eof, "no copy: the peer reads end of file while the supervisor runs")
        c.close()
    finally:
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait(timeout=10)
        lst.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sockbuf", required=True)
    ap.add_argument("--server", required=True)
    args = ap.parse_args()
    why = rp.seccomp_missing(args.sockbuf)
    if why:
        return rp.skip(why)
    s = socket.socket()
    try:
        s.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK)
    except OSError as e:
        return rp.skip(f"no SO_BUF_LOCK ({e}): a cut floor cannot be restored unlocked")
    finally:
        s.close()
    one_run(args, guard=False)
    one_run(args, guard=True)
    one_run(args, guard=True, fault="guard_no_precheck")
    no_copy_held(args)
    return rp.verdict()


if __name__ == "__main__":
    sys.exit(main())

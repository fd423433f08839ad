#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sockbufd on this host (polling: no fexit here), against a server nobody
here wrote the way servers run: unprivileged (nobody), under `sockbuf run
--policy initial` without a guard of its own, sizing its listener
(py_listener.py: the accepted connection's floor, rcv 131072, is its
listener's, published by the shim).

  options   a bad option or value: exit 2, named on standard error.
  control   the connection cut to 8192 and unlocked from outside
            (pidfd_getfd, as the kernel's moderation leaves a buffer)
            stays cut while no daemon runs.
  restore   with sockbufd running in the server's network namespace the
            cut is raised back to >= 131072 within 2 s, and its metrics
            file shows the socket guarded and the restore, by the
            process's name.
  bad file  a table of garbage for a live process of the same user is
            skipped, said once and counted; the daemon goes on serving.
  netns     a process of another network namespace that publishes a
            floor is skipped, said and counted (reason "netns").
  show      `sockbuf show --json` says served_by "none" before the daemon,
            "daemon" while it runs, "none" after it ends or is killed.
  stop      the daemon serving /metrics on a loopback port (the metrics
            server's threads start first): SIGHUP leaves it running,
            SIGTERM ends it as it should (exit 0, "stopped").  restart:
            floors found again, the next cut restored.  SIGKILL: the
            server goes on unharmed.

Every wait is bounded.  usage: daemon_checks.py --sockbuf PATH --sockbufd PATH
Exit: 0 pass, 1 fail, 77 skip (not root, no netns, no nobody user).
"""
import os
import pwd
import signal
import socket
import subprocess
import sys
import time

from daemon_lab import (AS_NOBODY, SERVER_PYTHON, Daemon, accepted, arguments, isolate, metric,
                        nobody_listener, rp, run_checks, start_time, until)

PORT = 5611
BYTES = 1 << 20
FLOOR = 131072
CUT = 4096  # stored as 8192
TABLE_SIZE = 64 + 8192 * 32
PRESENCE = "/run/sockbufd/serving"


def cut(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CUT)
    s.setsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK, 0)
    return rp.rcvbuf(s)


def cut_and_wait(s, seconds=2):
    """cut(s), then up to @seconds for its buffer to be back at FLOOR:
    the size it was cut to, and whether it came back."""
    got = cut(s)
    return got, until(lambda: rp.rcvbuf(s) >= FLOOR, seconds)


def served_by(sockbuf, pid, fd):
    """`sockbuf show --json`'s served_by for @fd of @pid, or None."""
    j = rp.show(sockbuf, pid) or {}
    return next((x.get("served_by") for x in j.get("sockets", []) if x["fd"] == fd), None)


def options_checks(sockbufd):
    for argv, word in ((["--bogus"], "--bogus"), (["--interval", "0"], "--interval"),
                       (["--metrics-listen", "nowhere"], "--metrics-listen"),
                       (["--interval"], "--interval"), (["extra"], "extra")):
        r = subprocess.run([sockbufd] + argv, capture_output=True, text=True, timeout=10)
        rp.check(r.returncode == 2 and word in r.stderr,
                 f"options: {' '.join(argv)}: exit {r.returncode}, named")


def body(ns, args, tmp):
    srv = nobody_listener(ns, args.sockbuf, PORT, BYTES)
    garbage = subprocess.Popen(["ip", "netns", "exec", ns.srv, *AS_NOBODY, "sleep", "60"])
    # A process of another network namespace publishing a floor.
    elsewhere = subprocess.Popen(
        ["ip", "netns", "exec", ns.cli, args.sockbuf, "run", "-q", "--via", "preload",
         "--policy", "initial", "--", SERVER_PYTHON, "-c",
         "import socket,sys; s=socket.socket(); "
         "s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536); print('sized', flush=True); "
         "sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    bad_path = alias_path = None
    daemon = None
    killed = None
    try:
        sized = elsewhere.stdout.readline().strip()
        conn = accepted(ns, srv, PORT, BYTES)
        if conn is None:
            return
        fd, s = conn

        # A table of garbage for a live process of the same user, under
        # its name and under an alias of it ("+PID", which sscanf takes):
        # the daemon reads only tables handed to it, never a name.
        nobody = pwd.getpwnam("nobody")
        bad_path = f"/dev/shm/sockbuf-floors.{garbage.pid}.{start_time(garbage.pid)}"
        alias_path = f"/dev/shm/sockbuf-floors.+{garbage.pid}.{start_time(garbage.pid)}"
        for path in (bad_path, alias_path):
            with open(path, "wb") as f:
                f.write(os.urandom(TABLE_SIZE))
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
            os.chmod(path, 0o600)

        who = served_by(args.sockbuf, srv.pid, fd)
        rp.check(who == "none", f"show before the daemon: served_by {who!r}")
        got, held = cut_and_wait(s, 0.5)
        rp.check(got == 2 * CUT and not held,
                 f"control: cut to {got}, still {rp.rcvbuf(s)} after 0.5 s without a daemon")

        # With the metrics server: its threads must not take the signals
        # the daemon reads from its signalfd.
        daemon = Daemon(ns.srv, args.sockbufd, tmp, 1,
                        args=("--interval", "10", "--metrics-listen", "127.0.0.1:9611"))
        t0 = time.monotonic()
        back = until(lambda: rp.rcvbuf(s) >= FLOOR, 2)
        rp.check(back, f"restore: back to {rp.rcvbuf(s)} in {time.monotonic() - t0:.2f} s "
                       f"of the daemon's start (want >= {FLOOR} within 2 s)")
        restores = until(lambda: metric(daemon.metrics, "sockbuf_restores_total",
                                        comm="python3", source="daemon"), 3)
        guarded = metric(daemon.metrics, "sockbuf_guarded_sockets", comm="python3")
        rp.check((restores or 0) >= 1 and (guarded or 0) >= 1,
                 f"metrics: restores {restores}, guarded {guarded} for python3")
        who = served_by(args.sockbuf, srv.pid, fd)
        rp.check(who == "daemon", f"show with the daemon: served_by {who!r}")
        refused = metric(daemon.metrics, "sockbuf_tables_refused_total", reason="contents")
        log = daemon.text()
        rp.check(not refused and f"pid {garbage.pid} " not in log,
                 f"files in /dev/shm not read: refused {refused}, "
                 f"named in the log: {f'pid {garbage.pid} ' in log}")
        netns = metric(daemon.metrics, "sockbuf_tables_refused_total", reason="netns")
        rp.check(sized == "sized" and (netns or 0) >= 1 and
                 f"pid {elsewhere.pid} " in log and "another network namespace" in log,
                 f"another namespace: refused {netns} (reason netns), said in the log")

        got, back = cut_and_wait(s)
        rp.check(got == 2 * CUT and back, f"still serving: cut to {got}, back to {rp.rcvbuf(s)}")
        # Each refused table is counted once, however many passes see it
        # (the file is written every second: wait for a newer one).
        before = os.stat(daemon.metrics).st_mtime_ns
        until(lambda: os.stat(daemon.metrics).st_mtime_ns != before, 3)
        again = {r: metric(daemon.metrics, "sockbuf_tables_refused_total", reason=r)
                 for r in ("contents", "netns")}
        again = {r: v or 0.0 for r, v in again.items()}  # present at 0, or absent
        rp.check(again == {"contents": 0.0, "netns": 1.0},
                 f"refusals counted once per table: {again}")

        daemon.proc.send_signal(signal.SIGHUP)
        before = os.stat(daemon.metrics).st_mtime_ns
        newer = until(lambda: os.stat(daemon.metrics).st_mtime_ns != before, 3)
        rp.check(newer and daemon.proc.poll() is None,
                 f"SIGHUP: still running ({daemon.proc.poll()}), metrics written since")
        rc = daemon.end(signal.SIGTERM)
        who = served_by(args.sockbuf, srv.pid, fd)
        rp.check(rc == 0 and "stopped" in daemon.text() and who == "none",
                 f"SIGTERM: exit {rc}, served_by {who!r}")

        daemon = Daemon(ns.srv, args.sockbufd, tmp, 2)
        until(lambda: metric(daemon.metrics, "sockbuf_guarded_sockets", comm="python3"), 3)
        got, back = cut_and_wait(s)
        rp.check(back, f"restart: floors found again, cut to {got}, back to {rp.rcvbuf(s)}")

        killed = daemon.proc.pid
        daemon.end(signal.SIGKILL)
        daemon = None
        who = served_by(args.sockbuf, srv.pid, fd)
        rp.check(who == "none", f"SIGKILL: served_by {who!r} (its file names a dead process)")
        got = cut(s)
        rp.check(srv.poll() is None and got == 2 * CUT,
                 f"SIGKILL: the server runs on (exit {srv.poll()}), its socket as left")
        s.close()
    finally:
        if daemon:
            daemon.end(signal.SIGTERM)
        # The killed daemon's presence file (a dead pid: readers ignore it).
        try:
            with open(PRESENCE) as f:
                if f.read().split()[0] == str(killed):
                    os.unlink(PRESENCE)
        except (OSError, IndexError):
            pass
        for path in (bad_path, alias_path):
            if path and os.path.exists(path):
                os.unlink(path)
        garbage.kill()
        garbage.wait()
        rp.stop(elsewhere, ask=rp.say_done)
        rp.stop(srv, ask=rp.say_done)


def main():
    args = arguments().parse_args()
    isolate()
    options_checks(args.sockbufd)
    return run_checks(body, args)


if __name__ == "__main__":
    sys.exit(main())

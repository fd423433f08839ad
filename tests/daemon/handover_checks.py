#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A process's own floor guard hands over to sockbufd and takes back
(issue 34, item 2), with a server nobody here wrote the way servers run:
unprivileged (nobody), under `sockbuf run --floor-guard 500` (the shim's
guard, polling every 500 ms: no CAP_BPF), its accepted connection's floor
(rcv 131072) its listener's.

  own       no daemon: a cut (8192, unlocked, from outside) is restored by
            the process's own guard within 2 s.
  handover  sockbufd --interval 20 --events off (it keeps every kind of
            cut within the guard's 500 ms, and its beat is stale only
            after 500 ms: a loaded host does not make the guard take its
            sockets back) starts in the server's namespace: the shim says
            the daemon serves its floors, `sockbuf show` says served_by
            "daemon", and the next cut is restored by the daemon (its
            sockbuf_restores_total{source="daemon"} moves); the time spent
            on the server's table is accounted to it
            (sockbuf_table_read_seconds_total).
  resume    sockbufd killed with SIGKILL: the shim says it serves its
            floors again, and a cut is restored (by the guard: no daemon
            runs) within 2 s.

The presence directory is the test's own (SOCKBUF_DAEMON_DIR), never the
host's /run/sockbufd.  Every wait is bounded.
usage: handover_checks.py --sockbuf PATH --sockbufd PATH
Exit: 0 pass, 1 fail, 77 skip (not root, no netns, no nobody user).
"""
import os
import pwd
import signal
import sys
import time

from daemon_checks import CUT, cut_and_wait, served_by
from daemon_lab import Daemon, accepted, arguments, metric, nobody_listener, rp, run_checks, until

PORT = 5612
BYTES = 1 << 20


def body(ns, args, tmp):
    nobody = pwd.getpwnam("nobody")
    # The presence directory: root's and 0755, as the unit's
    # RuntimeDirectory; the guard of a server run as nobody reads it.
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir, 0o755)
    os.chmod(tmp, 0o755)
    shim_log = os.path.join(tmp, "shim.log")
    open(shim_log, "w").close()
    os.chown(shim_log, nobody.pw_uid, nobody.pw_gid)
    env = dict(os.environ, SOCKBUF_DAEMON_DIR=run_dir)
    os.environ["SOCKBUF_DAEMON_DIR"] = run_dir  # `sockbuf show` too
    srv = nobody_listener(ns, args.sockbuf, PORT, BYTES,
                          opts=("--floor-guard", "500", "--log", shim_log), env=env)
    daemon = None

    def said(text):
        with open(shim_log) as f:
            return f.read().count(text)

    try:
        conn = accepted(ns, srv, PORT, BYTES)
        if conn is None:
            return
        fd, s = conn

        def by_guard(label, how):
            """A cut restored by the process's own guard."""
            got, back = cut_and_wait(s)
            who = served_by(args.sockbuf, srv.pid, fd)
            rp.check(got == 2 * CUT and back and who == "guard",
                     f"{label}: cut to {got}, back to {rp.rcvbuf(s)} {how} (served_by {who!r})")

        by_guard("own", "by the process's guard")

        daemon = Daemon(ns.srv, args.sockbufd, tmp, 1, args=("--interval", "20", "--events", "off"), env=env)
        prom = daemon.metrics
        t0 = time.monotonic()
        handed = until(lambda: said("sockbufd (pid %d) serves these floors" % daemon.proc.pid), 5)
        rp.check(handed == 1, f"handover: the shim said it once within "
                              f"{time.monotonic() - t0:.2f} s ({handed})")
        who = served_by(args.sockbuf, srv.pid, fd)
        rp.check(who == "daemon", f"handover: served_by {who!r}")
        until(lambda: metric(prom, "sockbuf_guarded_sockets", comm="python3"), 3)
        before = metric(prom, "sockbuf_restores_total", comm="python3", source="daemon") or 0
        got, back = cut_and_wait(s)
        after = until(lambda: (metric(prom, "sockbuf_restores_total", comm="python3",
                                      source="daemon") or 0) > before and
                      metric(prom, "sockbuf_restores_total", comm="python3", source="daemon"), 3)
        rp.check(back and (after or 0) == before + 1,
                 f"handover: cut to {got}, back to {rp.rcvbuf(s)}; the daemon's restores "
                 f"{before} -> {after} (the process's guard stood down)")

        cost = metric(prom, "sockbuf_table_read_seconds_total", comm="python3")
        rp.check(cost is not None and 0 < cost < 1,
                 f"cost accounting: reading python3's table took {cost} s in all")

        daemon.end(signal.SIGKILL)
        daemon = None
        t0 = time.monotonic()
        resumed = until(lambda: said("sockbufd gone"), 3)
        rp.check(resumed == 1, f"resume: the shim said so within {time.monotonic() - t0:.2f} s")
        by_guard("resume", "with no daemon running")
        s.close()
    finally:
        if daemon:
            daemon.end(signal.SIGTERM)
        rp.stop(srv, ask=rp.say_done)
        os.environ.pop("SOCKBUF_DAEMON_DIR", None)


def main():
    return run_checks(body, arguments().parse_args())


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sockbufd's serving loop against what a user controls (polling here).

  linger    an attacker as nobody publishes a send floor on a socket with
            SO_LINGER 3600 s and unsent data toward a peer that never
            reads, cuts it from behind the shim and closes it the moment
            the daemon raises it (linger_peer.py): the daemon's copy is
            then the last reference and its close() sleeps in tcp_close().
            Repeated up to --tries times (the seam close_late holds the
            daemon's copy 300 ms: the first try wins; --race without it,
            won within 1-10 tries here); after each, a canary of another
            user is cut and must be back within 1 s, and at the end
            SIGTERM must end the daemon within 1 s (exit 0).  Where a
            try left a close sleeping, the metrics show it pending and
            the attacker's takes refused (reason "closing").

Every wait is bounded.  usage: loop_checks.py --sockbuf PATH --sockbufd PATH
Exit: 0 pass, 1 fail, 77 skip (not root, no netns, no nobody user).
"""
import os
import signal
import subprocess
import sys
import time

from daemon_lab import AS_NOBODY, SERVER_PYTHON, Daemon, arguments, rp, run_checks, until

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "linger_peer.py")
SINK_PORT = 5631
CANARY_UID = "12346"


def shimmed(ns, sockbuf, who, *argv):
    return subprocess.Popen(["ip", "netns", "exec", ns, *who, sockbuf, "run", "-q", "--via",
                             "preload", "--policy", "initial", "--", SERVER_PYTHON, PEER, *argv],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def canary_back(canary):
    canary.stdin.write("cut\n")
    canary.stdin.flush()
    line = canary.stdout.readline().strip()
    return line.startswith("back ") and float(line.split()[1]) < 1000, line


def linger(ns, args, tmp):
    sink = subprocess.Popen(["ip", "netns", "exec", ns.cli, *AS_NOBODY, SERVER_PYTHON, PEER,
                             "sink", str(SINK_PORT)], stdout=subprocess.PIPE, text=True)
    daemon = canary = attacker = None
    try:
        rp.check(sink.stdout.readline().strip() == "listening", "sink listening")
        # The seam holds each copy 300 ms before its close: the attacker's
        # close then comes first at every try (--race: the bare race).
        env = dict(os.environ)
        if not args.race:
            env["SOCKBUF_RUN_FAULT"] = "close_late"
        daemon = Daemon(ns.srv, args.sockbufd, tmp, 1, env=env)
        canary = shimmed(ns.srv, args.sockbuf, ("setpriv", "--reuid", CANARY_UID, "--regid",
                                               CANARY_UID, "--clear-groups"),
                         "canary", rp.CLI_ADDR, str(SINK_PORT))
        ready = canary.stdout.readline().strip()
        rp.check(ready.startswith("ready"), f"canary: {ready!r}")
        ok, line = canary_back(canary)
        rp.check(ok, f"canary served before the attack: {line!r}")
        attacker = shimmed(ns.srv, args.sockbuf, AS_NOBODY, "attacker", rp.CLI_ADDR,
                           str(SINK_PORT), str(args.tries))
        tries = stuck = 0
        for line in attacker.stdout:
            line = line.strip()
            print(f"attacker: {line}", flush=True)
            tries += 1
            if "not raised" in line:
                # Served no more: its user's close sleeps (the metrics
                # say so), or the daemon stopped.
                stuck = until(lambda: daemon.metric("sockbufd_closes_pending"), 2) or 0
                break
            ok, back = canary_back(canary)
            if not ok:
                rp.check(False, f"after the attacker's {line}: canary {back!r}")
                break
        print(f"linger: {tries} tries, closes pending {stuck}")
        if os.environ.get("LOOP_DEBUG"):
            print(open(daemon.metrics).read(), daemon.text())
        rp.check(stuck, f"a close left sleeping within {tries} tries (else nothing was shown)")
        ok, back = canary_back(canary)
        rp.check(ok, f"canary after {tries} tries: {back!r}")
        refused = daemon.metric("sockbuf_refusals_total", reason="closing")
        rp.check(not stuck or (refused or 0) >= 1, f"attacker refused (closing): {refused}")
        t0 = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        try:
            rc = daemon.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            rc = None
        rp.check(rc == 0, f"SIGTERM after the attack: exit {rc} in "
                          f"{time.monotonic() - t0:.2f} s (want 0 within 1 s)")
    finally:
        if daemon:
            daemon.end(signal.SIGKILL)
        for p in (attacker, canary, sink):
            if p:
                p.kill()
                p.wait()


def body(ns, args, tmp):
    linger(ns, args, tmp)


def main():
    ap = arguments()
    ap.add_argument("--tries", type=int, default=20)
    ap.add_argument("--race", action="store_true",
                    help="no seam: the attacker races the daemon's close")
    args = ap.parse_args()
    return run_checks(body, args)


if __name__ == "__main__":
    sys.exit(main())

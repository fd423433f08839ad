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

  names     processes name themselves (prctl PR_SET_NAME) with invalid
            UTF-8 and with a newline followed by a forged daemon line:
            the metrics file parses (prometheus_client's parser where
            installed, and a strict check of its own), no label holds a
            control character, the log has no forged line.  Then 4
            batches of 40 short-lived processes with names of their own
            (the 100,000 of a flood, scaled) under --max-services 20:
            the series of gone processes are removed, the services kept
            are at most 20 with the overflow counted, the daemon's RSS
            grows by less than 8 MiB.  Counters present at 0 from the
            start, sockbufd_build_info.
  startup   --metrics-listen [::1]:9612 serves /metrics (no exposer_*
            series); a port in use: exit 1, the address and errno named;
            --metrics-file in a missing directory: exit 1 at once; a
            second sockbufd on the same run directory: exit 1 naming the
            first's pid, the first's presence file unchanged.

  lock      a daemon killed at each point of a restore (seams: after its
            record, before any write; between the size's write, which
            locks the direction, and the lock's clear; after the restore,
            before the record's clear): the next daemon on the same run
            directory leaves the socket's lock bits as they were before
            the restore (0) within 2 s.  A send lock the program set
            itself after the kill is kept (bits 1).  A socket whose
            process exited (a copy lives on) is put back at the first
            look at it, when a process of nobody holding it registers.

Every wait is bounded.  usage: loop_checks.py --sockbuf PATH --sockbufd PATH
Exit: 0 pass, 1 fail, 77 skip (not root, no netns, no nobody user).
"""
import os
import signal
import socket
import subprocess
import sys
import time

import daemon_lab
import floor_table
from daemon_lab import AS_NOBODY, SERVER_PYTHON, Daemon, arguments, rp, run_checks, until

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "linger_peer.py")
NAMED = os.path.join(HERE, "named_peer.py")
SINK_PORT = 5631
CANARY_UID = "12346"


def shimmed(ns, sockbuf, who, *argv, script=PEER):
    return subprocess.Popen(["ip", "netns", "exec", ns, *who, sockbuf, "run", "-q", "--via",
                             "preload", "--policy", "initial", "--", SERVER_PYTHON, script, *argv],
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


PARSE = """
import sys
from prometheus_client.parser import text_string_to_metric_families
n = sum(len(f.samples) for f in text_string_to_metric_families(sys.stdin.read()))
print(n)
"""


def textfile_problems(raw):
    """What makes @raw (bytes) an invalid Prometheus text file: a strict
    check of the exposition format, then prometheus_client's parser where
    it is installed (python3-prometheus-client).  A list of reasons."""
    import re
    bad = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return [f"not UTF-8: {e}"]
    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="'
                        r'(?:[^"\\\n]|\\[\\"n])*",?)*)\})? (\S+)$')
    seen = set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = sample.match(line)
        if not m:
            bad.append(f"bad line {line!r}")
            continue
        if any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in line):
            bad.append(f"control character in {line!r}")
        if line.rsplit(" ", 1)[0] in seen:
            bad.append(f"duplicate series {line!r}")
        seen.add(line.rsplit(" ", 1)[0])
    r = subprocess.run([SERVER_PYTHON, "-c", PARSE], input=text, capture_output=True, text=True,
                       timeout=20)
    if r.returncode != 0 and "No module named" not in r.stderr:
        bad.append(f"prometheus_client: {r.stderr.strip().splitlines()[-1]}")
    return bad


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(x for x in f if x.startswith("VmRSS:")).split()[1])


def names(ns, args, tmp):
    daemon = peers = None
    try:
        daemon = Daemon(ns.srv, args.sockbufd, tmp, 2,
                        args=("--interval", "10", "--max-services", "20"), prom="names.prom")
        zero = until(lambda: daemon.metric("sockbuf_tables_refused_total", reason="owner")
                     is not None, 3)
        info = daemon.metric("sockbufd_build_info")
        rp.check(zero and daemon.metric("sockbuf_refusals_total", reason="error") == 0 and
                 info == 1, f"counters at 0 from the start, build_info {info}")
        hostile = [b"bad\xff\xfe\xc0name", b"x\nsockbufd: zz"]
        peers = shimmed(ns.srv, args.sockbuf, AS_NOBODY, *[h.hex() for h in hostile],
                        script=NAMED)
        pids = [int(peers.stdout.readline().split()[1]) for _ in hostile]

        def metric(name):
            try:
                return daemon.metric(name) or 0
            except UnicodeDecodeError:  # the file is invalid: said below
                return 0

        served = until(lambda: metric("sockbuf_processes") >= 2 and
                       metric("sockbuf_restores_total") >= 2, 5)
        with open(daemon.metrics, "rb") as f:
            raw = f.read()
        problems = textfile_problems(raw)
        rp.check(served and not problems, f"hostile names: served {served}, textfile "
                                          f"problems {problems[:3]}")
        daemon.log.flush()
        with open(daemon.log.name, "rb") as f:
            log = f.read().decode("utf-8", errors="replace")
            f.seek(0)
            try:
                f.read().decode("utf-8")
                utf8 = True
            except UnicodeDecodeError:
                utf8 = False
        forged = [x for x in log.splitlines() if x.startswith("sockbufd: zz")]
        rp.check(utf8 and not forged and all(f"pid {p} (" in log for p in pids),
                 f"log: valid UTF-8 {utf8}, forged lines {forged}, both processes named")
        peers.stdin.close()
        peers.wait(timeout=10)
        peers = None
        # The flood, scaled: batches of short-lived processes, each name
        # its own.
        rss0 = rss_kib(daemon.proc.pid)
        for b in range(4):
            batch = [f"flood{b}-{i}".encode() for i in range(40)]
            p = shimmed(ns.srv, args.sockbuf, AS_NOBODY, *[h.hex() for h in batch],
                        script=NAMED)
            for _ in batch:
                p.stdout.readline()
            until(lambda: metric("sockbuf_processes") >= 40, 5)
            p.stdin.close()
            p.wait(timeout=10)
        gone = until(lambda: metric("sockbuf_processes") == 0 and
                     b'comm="flood' not in open(daemon.metrics, "rb").read(), 5)
        with open(daemon.metrics, "rb") as f:
            raw = f.read()
        overflow = metric("sockbufd_series_overflow_total")
        grown = rss_kib(daemon.proc.pid) - rss0
        print(f"names: 160 processes, file {len(raw)} bytes, overflow {overflow}, "
              f"RSS +{grown} KiB")
        rp.check(gone, "series of gone processes removed")
        rp.check((overflow or 0) >= 1, f"past --max-services 20: overflow counted ({overflow})")
        rp.check(grown < 8192, f"daemon RSS grew {grown} KiB (want < 8 MiB)")
        rp.check(not textfile_problems(raw), "textfile valid after the flood")
    finally:
        if peers:
            peers.kill()
            peers.wait()
        if daemon:
            daemon.end(signal.SIGTERM)


def startup(ns, args, tmp):
    run_dir = os.path.join(tmp, "run")
    env = dict(os.environ, SOCKBUF_DAEMON_DIR=run_dir)

    def start(*argv):
        return subprocess.Popen(["ip", "netns", "exec", ns.srv, args.sockbufd, "--events", "off",
                                 *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, env=env)

    def ended(p, seconds=5):
        try:
            p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return None, p.stderr.read()
        return p.returncode, p.stderr.read()

    first = start("--metrics-listen", "[::1]:9612", "--metrics-file",
                  os.path.join(tmp, "startup.prom"))
    try:
        get = ("import urllib.request,sys; "
               "sys.stdout.write(urllib.request.urlopen('http://[::1]:9612/metrics', "
               "timeout=3).read().decode())")
        body = until(lambda: rp.run("ip", "netns", "exec", ns.srv, SERVER_PYTHON, "-c", get,
                                    check_rc=False).stdout, 5)
        rp.check(first.poll() is None and "sockbuf_passes_total" in (body or "") and
                 "exposer_" not in body and not textfile_problems((body or "").encode()),
                 f"--metrics-listen [::1]:9612: running {first.poll() is None}, "
                 f"{len(body or '')} bytes, no exposer_ series")
        presence = os.path.join(run_dir, "serving")
        before = until(lambda: os.path.exists(presence) and open(presence).read(), 3)
        rc, err = ended(start())
        after = os.path.exists(presence) and open(presence).read()
        rp.check(rc == 1 and f"pid {first.pid}" in err and before == after,
                 f"second sockbufd: exit {rc}, {err.strip()!r}, presence file kept "
                 f"({before == after})")
    finally:
        first.send_signal(signal.SIGTERM)
        ended(first)
    holder = subprocess.Popen(["ip", "netns", "exec", ns.srv, SERVER_PYTHON, "-c",
                               "import socket,sys; s=socket.socket(); "
                               "s.bind(('127.0.0.1', 9613)); s.listen(); print('held', "
                               "flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        rc, err = ended(start("--metrics-listen", "127.0.0.1:9613"))
        rp.check(rc == 1 and "127.0.0.1:9613" in err and "Address already in use" in err,
                 f"port in use: exit {rc}, {err.strip()!r}")
    finally:
        holder.kill()
        holder.wait()
    rc, err = ended(start("--metrics-file", "/nonexistent/dir/m.prom"), 3)
    rp.check(rc == 1 and "/nonexistent/dir" in err,
             f"--metrics-file /nonexistent/dir/m.prom: exit {rc}, {err.strip()!r}")


# As nobody: an own table (a sealed memfd) naming the socket it holds at
# descriptor argv[1] with receive floor argv[2], registered over argv[3];
# prints the answer, then waits for a line.
REGISTER_HELD = floor_table.child(r"""
import os, sys
import floor_table
held, floor, reg = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
fd = floor_table.own_table(os.fstat(held).st_ino, floor)
print("answer", floor_table.register(reg, fd), flush=True)
sys.stdin.readline()
""")


def lock_case(ns, args, tmp, n, fault, after_kill, then):
    """The canary's cut restored by a daemon killed at @fault (the seam);
    after_kill(pid, fd, s) (s: a copy of the canary's socket) -> what the
    lock bits must be once the next daemon looked; then(...) checks the
    next daemon (a Daemon) with that want."""
    port = SINK_PORT + n
    sink = subprocess.Popen(["ip", "netns", "exec", ns.cli, *AS_NOBODY, SERVER_PYTHON, PEER,
                             "sink", str(port)], stdout=subprocess.PIPE, text=True)
    canary = first = second = s = None
    try:
        rp.check(sink.stdout.readline().strip() == "listening", f"{fault}: sink listening")
        canary = shimmed(ns.srv, args.sockbuf, AS_NOBODY, "canary", rp.CLI_ADDR, str(port))
        ready = canary.stdout.readline().split()
        pid, fd = int(ready[2].split("=")[1]), int(ready[3].split("=")[1])
        s = rp.dup_of(pid, fd)
        env = dict(os.environ, SOCKBUF_RUN_FAULT=fault)
        first = Daemon(ns.srv, args.sockbufd, tmp, 10 + 2 * n, env=env, prom=f"lock{n}a.prom")
        until(lambda: (daemon_lab.metric(first.metrics, "sockbuf_guarded_sockets") or 0) >= 1
              or first.proc.poll() is not None, 5)
        canary.stdin.write("cut\n")
        canary.stdin.flush()
        canary.stdout.readline()
        try:
            rc = first.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        left = s.getsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK)
        rp.check(rc == -signal.SIGKILL, f"{fault}: the daemon killed itself mid-restore "
                                        f"(exit {rc}), lock bits left {left}")
        want = after_kill(pid, fd, s, left, canary)
        second = Daemon(ns.srv, args.sockbufd, tmp, 11 + 2 * n, prom=f"lock{n}b.prom")
        then(second, s, want, pid, fd)
    finally:
        for d in (first, second):
            if d:
                d.end(signal.SIGTERM)
        if s:
            s.close()
        for p in (canary, sink):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def lock_is(fault, want, within=2):
    def then(daemon, s, want_bits, pid, fd):
        # Its metrics file is first written after its start's look at the
        # journal.
        up = until(lambda: (daemon.metric("sockbuf_passes_total") or 0) >= 1, 5)
        rp.check(up, f"{fault}: the next daemon started")
        got = until(lambda: s.getsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK) == want_bits,
                    within)
        rp.check(got, f"{fault}: the next daemon left the lock bits at "
                      f"{s.getsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK)} (want {want_bits} "
                      f"within {within} s); it said: "
                      f"{[x for x in daemon.text().splitlines() if 'restore' in x]}")
    return then


def lock_left(ns, args, tmp):
    # Killed after the record, before any write: nothing to put back.
    lock_case(ns, args, tmp, 1, "die_before_write",
              lambda pid, fd, s, left, c: left, lock_is("die_before_write", 0))
    # Between the size's write (it locks the receive direction) and the
    # lock's clear: the next daemon clears that bit.
    lock_case(ns, args, tmp, 2, "die_mid_restore",
              lambda pid, fd, s, left, c: 0, lock_is("die_mid_restore", 0))

    # The same, and the program sets its send buffer itself before the
    # next daemon starts (SO_SNDBUF locks that direction): its lock is
    # the program's, and is kept.
    def own_send_lock(pid, fd, s, left, c):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        return 1
    lock_case(ns, args, tmp, 3, "die_mid_restore", own_send_lock,
              lock_is("die_mid_restore, then the program's SO_SNDBUF", 1))
    # Killed after the restore, before the record's clear: nothing left.
    lock_case(ns, args, tmp, 4, "die_after_restore",
              lambda pid, fd, s, left, c: 0, lock_is("die_after_restore", 0))

    # The process recorded exits; its socket lives on (a copy), and the
    # next daemon's start does not find it.  A process of nobody given the
    # copy registers a table naming it (a floor it is above: no restore):
    # the daemon's first look at it puts the lock back.
    held = {}

    def owner_gone(pid, fd, s, left, canary):
        canary.kill()
        canary.wait()
        return 0

    def first_look(daemon, s, want, pid, fd):
        said = until(lambda: "not there now" in daemon.text(), 3)
        rp.check(said, f"left: the next daemon said the socket was not found at its start: "
                       f"{daemon.text().strip()!r}")
        lock = s.getsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK)
        rp.check(lock != 0, f"left: still locked ({lock}) before a served process holds it")
        held["p"] = subprocess.Popen(
            ["ip", "netns", "exec", ns.srv, *AS_NOBODY, SERVER_PYTHON, "-c", REGISTER_HELD,
             str(s.fileno()), "4608", "/run/sockbufd/register"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=[s.fileno()])
        answer = held["p"].stdout.readline().strip()
        rp.check(answer == "answer 0", f"left: a process of nobody holding it registered: "
                                       f"{answer!r}")
        lock_is("left, found at the first look", 0, 3)(daemon, s, 0, pid, fd)
        rp.check("found at its first look" in daemon.text(),
                 f"left: the daemon said so: "
                 f"{[x for x in daemon.text().splitlines() if 'first look' in x]}")
    try:
        lock_case(ns, args, tmp, 5, "die_mid_restore", owner_gone, first_look)
    finally:
        if "p" in held:
            rp.stop(held["p"], ask=rp.say_done)


def body(ns, args, tmp):
    for part in (args.only or 'startup,names,lock,linger').split(','):
        {'startup': startup, 'names': names, 'lock': lock_left, 'linger': linger}[part](ns, args, tmp)


def main():
    ap = arguments()
    ap.add_argument("--tries", type=int, default=20)
    ap.add_argument("--only", help="a comma-separated list of startup,names,lock,linger")
    ap.add_argument("--race", action="store_true",
                    help="no seam: the attacker races the daemon's close")
    args = ap.parse_args()
    return run_checks(body, args)


if __name__ == "__main__":
    sys.exit(main())

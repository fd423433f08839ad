#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sockbufd and the library against unprivileged users (user nobody), each
attack in the test's own mount and network namespaces (daemon_lab's
isolate(): a private /dev/shm and /run/sockbufd), every wait bounded.

  force     A process with no capabilities writes a floor table for
            another process of its user that holds CAP_NET_ADMIN (an
            ambient capability), names that process's listener with a
            receive floor of 512 MiB, maps it (the publisher a reader
            believed) and offers it to the daemon over its registration
            socket: the listener is never raised past 2 x rmem_max, the
            offer is refused (-EPERM).
  names     50,000 files named like tables in /dev/shm and one alias
            ("sockbuf-floors.+PID.START", which sscanf takes) for a live
            process: the daemon reads none of them (it scans no
            directory): under 0.5 s of CPU in 3 s (0.18 s idle, 0.31 s at
            load 10-15; a daemon that rescans the names took 0.85 s).
  full      /dev/shm full (the test's own small tmpfs): a program run as
            nobody under the preload shim sizes a socket, publishes its
            floor and runs on (its table is a memfd, allocated before it
            is mapped), where a table in /dev/shm made sparse and written
            through its mapping killed it with SIGBUS; the same under the
            seccomp supervisor, whose table for the program is in
            /dev/shm: publication fails, the program and the supervisor
            run on.
  left      A program under the shim, as nobody, sized sockets, its forked
            worker too; the worker exits, the program is ended by SIGTERM:
            no table is left in /dev/shm.
  share     A flood from user nobody (FLOODERS processes, each holding
            FLOOD_FDS descriptors and a registered table of 8,000 floors
            for inodes it does not hold, its change count bumped without
            pause) and a victim of another user (daemon) under `sockbuf
            run --policy initial`: each of CUTS cuts of the victim's
            connection is restored within SHARE_BOUND s (p50, p99, max and
            the load average printed).

usage: hostile_checks.py --sockbuf PATH --sockbufd PATH [--only CHECK]...
Exit: 0 pass, 1 fail, 77 skip (not root, no netns, no nobody user).
"""
import ctypes
import glob
import os
import signal
import socket
import subprocess
import sys
import time

import floor_table
from daemon_lab import (AS_NOBODY, SERVER_PYTHON, Daemon, accepted, arguments, rp, run_checks,
                        start_time, until)

PORT = 5621
HUGE = 536870912


def rmem_max():
    with open("/proc/sys/net/core/rmem_max") as f:
        return int(f.read())


# Run as nobody: writes a table for the process argv[1] naming socket
# inode argv[2] with a receive floor argv[3], publisher itself, maps it
# and offers it to the daemon (argv[4]: its registration socket); prints
# the daemon's answer, then waits for a line on stdin.
FORGER = floor_table.child(r"""
import mmap, os, sys
import floor_table
pid, ino, floor, reg = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fd, path = floor_table.foreign_file(pid, ino, floor)
m = mmap.mmap(fd, floor_table.SIZE)
answer = "none"
try:
    answer = str(floor_table.register(reg, fd, floor_table.FOREIGN, pid, timeout=2))
except OSError as e:
    answer = f"error {e.errno}"
print("answer", answer, flush=True)
sys.stdin.readline()
os.unlink(path)
""")

# A listener in argv[1]:argv[2] that prints its fd and inode, then waits.
LISTENER = r"""
import os, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
print(s.fileno(), os.fstat(s.fileno()).st_ino, flush=True)
sys.stdin.readline()
"""


def force_checks(ns, args, tmp):
    victim = subprocess.Popen(
        ["ip", "netns", "exec", ns.srv, "setpriv", "--reuid", "nobody", "--regid", "nogroup",
         "--clear-groups", "--inh-caps", "+net_admin", "--ambient-caps", "+net_admin",
         SERVER_PYTHON, "-c", LISTENER, rp.SRV_ADDR, str(PORT)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    forger = daemon = None
    try:
        line = victim.stdout.readline().split()
        rp.check(len(line) == 2, f"force: the victim listens: {line}")
        if len(line) != 2:
            return
        fd, ino = int(line[0]), int(line[1])
        with open(f"/proc/{victim.pid}/status") as f:
            caps = next(x for x in f if x.startswith("CapEff")).split()[1]
        rp.check(int(caps, 16) & (1 << 12), f"force: the victim holds CAP_NET_ADMIN ({caps})")
        s = rp.dup_of(victim.pid, fd)
        before = rp.rcvbuf(s)
        daemon = Daemon(ns.srv, args.sockbufd, tmp, 1)
        until(lambda: os.path.exists("/run/sockbufd/register"), 3)
        forger = subprocess.Popen(
            ["ip", "netns", "exec", ns.srv, *AS_NOBODY, SERVER_PYTHON, "-c", FORGER,
             str(victim.pid), str(ino), str(HUGE), "/run/sockbufd/register"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        answer = forger.stdout.readline().strip()
        rp.check(answer == "answer -1", f"force: the daemon's answer to the forged offer: "
                                        f"{answer!r} (want -1, EPERM)")
        raised = until(lambda: rp.rcvbuf(s) > 2 * rmem_max(), 2)
        rp.check(not raised, f"force: the victim's listener {before} -> {rp.rcvbuf(s)} "
                             f"(2 x rmem_max {2 * rmem_max()}) after 2 s")
        s.close()
    finally:
        if forger:
            rp.stop(forger, ask=rp.say_done)
        if daemon:
            daemon.end(signal.SIGTERM)
        rp.stop(victim, ask=rp.say_done)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def names_checks(ns, args, tmp):
    live = subprocess.Popen(["ip", "netns", "exec", ns.srv, *AS_NOBODY, "sleep", "60"])
    daemon = None
    try:
        made = subprocess.run(
            [*AS_NOBODY, sys.executable, "-c",
             "import os, sys\n"
             "for i in range(50000):\n"
             "    os.close(os.open(f'/dev/shm/sockbuf-floors.{4000000 + i}.{i + 1}',"
             " os.O_CREAT | os.O_WRONLY, 0o600))\n"
             "os.close(os.open(f'/dev/shm/sockbuf-floors.+{sys.argv[1]}.{sys.argv[2]}',"
             " os.O_CREAT | os.O_WRONLY, 0o600))\n",
             str(live.pid), str(start_time(live.pid))], timeout=120)
        rp.check(made.returncode == 0, f"names: 50,001 files made as nobody ({made.returncode})")
        daemon = Daemon(ns.srv, args.sockbufd, tmp, 2)
        until(lambda: os.path.exists(daemon.metrics), 3)
        t0, c0 = time.monotonic(), cpu_seconds(daemon.proc.pid)
        time.sleep(3)  # a measurement window, not a synchronisation
        used = cpu_seconds(daemon.proc.pid) - c0
        rp.check(used < 0.5, f"names: the daemon used {used:.2f} s of CPU in "
                             f"{time.monotonic() - t0:.1f} s (want < 0.5)")
    finally:
        if daemon:
            daemon.end(signal.SIGTERM)
        live.kill()
        live.wait()
        for p in glob.glob("/dev/shm/sockbuf-floors.*"):
            os.unlink(p)


SIZED = ("import socket; s = socket.socket(); "
         "s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536); print('alive', flush=True)")


def fill_shm():
    """Fills /dev/shm (the test's own tmpfs) as nobody; the filler's path."""
    path = "/dev/shm/filler"
    subprocess.run([*AS_NOBODY, "sh", "-c", f"cat /dev/zero > {path}"], capture_output=True,
                   timeout=60)
    st = os.statvfs("/dev/shm")
    rp.check(st.f_bavail == 0, f"full: /dev/shm has {st.f_bavail} blocks free")
    return path


def full_checks(ns, args, tmp):
    filler = fill_shm()
    try:
        ways = [("preload", ())]
        if not rp.seccomp_missing(args.sockbuf):
            ways.append(("seccomp", ("--floor-guard", "50")))
        for via, extra in ways:
            run = subprocess.run(
                [*AS_NOBODY, args.sockbuf, "run", "-q", "--via", via, "--policy", "initial",
                 *extra, "--", SERVER_PYTHON, "-c", SIZED],
                capture_output=True, text=True, timeout=30)
            rp.check(run.returncode == 0 and run.stdout.strip() == "alive",
                     f"full: --via {via}: exit {run.returncode} (-7: SIGBUS), "
                     f"out {run.stdout.strip()!r}, err {run.stderr.strip()[-200:]!r}")
    finally:
        os.unlink(filler)


# Sizes a socket (published), forks a worker that sizes one too and
# exits; then waits for SIGTERM.
WORKERS = r"""
import os, socket, sys, time
a = socket.socket(); a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
pid = os.fork()
if pid == 0:
    b = socket.socket(); b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sys.exit(0)
os.waitpid(pid, 0)
print("ready", flush=True)
sys.stdin.readline()
"""


def left_checks(ns, args, tmp):
    p = subprocess.Popen([*AS_NOBODY, args.sockbuf, "run", "-q", "--via", "preload", "--policy",
                          "initial", "--", SERVER_PYTHON, "-c", WORKERS],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = p.stdout.readline().strip()
    rp.check(ready == "ready", f"left: the program and its worker sized sockets: {ready!r}")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    # The wrapper forwards the signal; its program is gone when it is.
    left = glob.glob("/dev/shm/sockbuf-floors.*")
    rp.check(not left, f"left: tables in /dev/shm after a worker's exit and SIGTERM: {left}")


FLOODERS = 6
FLOOD_FDS = 2000
CUTS = 20
SHARE_BOUND = 0.5
SHARE_PORT = 5622

# Run as nobody: FLOOD_FDS descriptors, a registered table (argv[1]: the
# registration socket) of 8,000 floors naming inodes it does not hold, its
# change count bumped until stdin closes.
FLOODER = floor_table.child(r"""
import mmap, os, resource, struct, sys, threading
import floor_table
n = int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 100), hard))
held = [os.open("/dev/null", os.O_RDONLY) for _ in range(n)]
fd = floor_table.new_memfd()
m = mmap.mmap(fd, floor_table.SIZE)
for i in range(8000):
    m[floor_table.at(i):floor_table.at(i + 1)] = floor_table.slot(900000000 + i, rcv=1 << 20)
m[0:floor_table.HEADER.size] = floor_table.header(os.getpid(), floor_table.start_time(os.getpid()),
                                                  max_probe=8192)
print("answer", floor_table.register(sys.argv[1], fd), flush=True)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
changes = floor_table.CHANGES
k = 1
while not stop.is_set():
    k += 1
    m[changes:changes + 4] = struct.pack("=I", k & 0xffffffff)
""")


def share_checks(ns, args, tmp):
    daemon = Daemon(ns.srv, args.sockbufd, tmp, 3, nice=-10)  # as the unit runs it
    until(lambda: os.path.exists("/run/sockbufd/register"), 3)
    flood, victim = [], None
    try:
        for _ in range(FLOODERS):
            flood.append(subprocess.Popen(
                ["ip", "netns", "exec", ns.srv, *AS_NOBODY, SERVER_PYTHON, "-c", FLOODER,
                 "/run/sockbufd/register", str(FLOOD_FDS)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        answers = [f.stdout.readline().strip() for f in flood]
        rp.check(all(a == "answer 0" for a in answers), f"share: the flood registered: {answers}")
        argv = ["setpriv", "--reuid", "daemon", "--regid", "daemon", "--clear-groups",
                args.sockbuf, "run", "-q", "--via", "preload", "--policy", "initial", "--",
                SERVER_PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                            "shim", "py_listener.py"),
                rp.SRV_ADDR, str(SHARE_PORT), str(1 << 20)]
        victim = subprocess.Popen(["ip", "netns", "exec", ns.srv] + argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        conn = accepted(ns, victim, SHARE_PORT, 1 << 20)
        if conn is None:
            return
        fd, s = conn
        back = until(lambda: rp.rcvbuf(s) >= 131072, 5)
        rp.check(back, f"share: the victim's floor kept before the cuts ({rp.rcvbuf(s)})")
        times = []
        for _ in range(CUTS):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.setsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK, 0)
            t0 = time.monotonic()
            ok = until(lambda: rp.rcvbuf(s) >= 131072, 3)
            times.append(time.monotonic() - t0 if ok else float("inf"))
        times.sort()
        p50, p99, worst = times[len(times) // 2], times[min(len(times) - 1,
                                                             int(len(times) * 0.99))], times[-1]
        load = os.getloadavg()
        print(f"share figures: {FLOODERS} flooders x {FLOOD_FDS} fds x 8000 floors (uid nobody), "
              f"victim uid daemon, {CUTS} cuts: restore p50 {p50 * 1000:.0f} ms, p99 "
              f"{p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms; load average "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; daemon CPU "
              f"{cpu_seconds(daemon.proc.pid):.2f} s")
        deferred = [daemon.metric("sockbuf_tables_refused_total", reason=r)
                    for r in ("share", "budget")]
        print(f"share: reads put off: for the fair share {deferred[0]}, for the tick's "
              f"budget {deferred[1]}")
        rp.check(worst <= SHARE_BOUND,
                 f"share: the victim's restores under the flood, max {worst:.3f} s "
                 f"(bound {SHARE_BOUND} s)")
        s.close()
    finally:
        for f in flood:
            rp.stop(f, ask=rp.say_done)
        if victim:
            rp.stop(victim, ask=rp.say_done)
        daemon.end(signal.SIGTERM)


CHECKS = {"force": force_checks, "names": names_checks, "full": full_checks,
          "left": left_checks, "share": share_checks}


def body(ns, args, tmp):
    for name in args.only or CHECKS:
        CHECKS[name](ns, args, tmp)


def main():
    ap = arguments()
    ap.add_argument("--only", action="append", choices=sorted(CHECKS),
                    help="run this check alone (again for more)")
    return run_checks(body, ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())

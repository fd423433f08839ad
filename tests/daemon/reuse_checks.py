#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sockbufd against pid reuse between a check and an open: a process of
user nobody gets the daemon to look at it, exits, and a process of root
(CAP_NET_ADMIN) takes its pid number.  The test owns the pid namespace
(unshare --pid): it gives the number away through ns_last_pid while the
daemon is held, by a test seam (SOCKBUF_RUN_FAULT), at the point where
the two steps meet.  The attackers run as nobody; the root process is
the one that must get nothing.

  own      A process of nobody registers its own table (a sealed memfd)
           naming its listener with a receive floor of 512 MiB; the
           daemon stops before its first read of that table (seam
           stop_before_read).  The process exits; a root process takes
           its number, holding the same table at the same descriptor
           number and the listener.  The daemon reads the table on, and
           must raise nothing: its copy of the process is the pidfd it
           got at the registration, not the number.
  foreign  A process of nobody publishes a table for another process of
           nobody (as a supervisor or `sockbuf fix --guard` does: a file
           in /dev/shm) naming a listener with a receive floor of 512
           MiB and offers it; the daemon stops right after it opened the
           target's pidfd (seam stop_at_vet).  The target exits; a root
           process holding the listener takes its number.  The offer is
           refused (the start time read after the open names another
           process), the listener never raised.

usage: reuse_checks.py --sockbuf PATH --sockbufd PATH [--only own|foreign]
Exit: 0 pass, 1 fail, 77 skip (not root, no pid namespace, no netns).
"""
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

import floor_table
from daemon_lab import AS_NOBODY, SERVER_PYTHON, Daemon, arguments, rp, run_checks, until

PORT = 5631
HUGE = 536870912
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438
PIDNS = "SOCKBUF_TEST_PIDNS"
libc = ctypes.CDLL(None, use_errno=True)

# As nobody: a listener (argv[1]:argv[2]) and an own table naming it with
# a receive floor argv[3], registered over argv[4]; prints the answer,
# the table's and the listener's descriptor numbers and the listener's
# inode, then waits for a line.
OWNER = floor_table.child(r"""
import os, socket, sys
import floor_table
addr, port, floor, reg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, port)); ls.listen()
ino = os.fstat(ls.fileno()).st_ino
fd = floor_table.own_table(ino, floor)
answer = floor_table.register(reg, fd)
print("answer", answer, fd, ls.fileno(), ino, flush=True)
sys.stdin.readline()
""")

# As nobody: a process that only waits (the foreign table's target).
WAITER = "import sys; print('up', flush=True); sys.stdin.readline()"

# As nobody: a listener in argv[1]:argv[2]; prints its fd and inode.
LISTENER = r"""
import os, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen()
print(s.fileno(), os.fstat(s.fileno()).st_ino, flush=True)
sys.stdin.readline()
"""

# As nobody: a table in /dev/shm for process argv[1] naming inode argv[2]
# with receive floor argv[3], offered over argv[4]; prints the answer
# (read after the test let the daemon go on), then waits.
FORGER = floor_table.child(r"""
import os, sys
import floor_table
pid, ino, floor, reg = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fd, path = floor_table.foreign_file(pid, ino, floor)
c = floor_table.offer(reg, fd, floor_table.FOREIGN, pid, timeout=20)
print("sent", flush=True)
try:
    answer = str(floor_table.answer(c))
except OSError as e:
    answer = f"error {e.errno}"
print("answer", answer, flush=True)
sys.stdin.readline()
os.unlink(path)
""")

# Root, with every capability: holds what it was given and waits.
HOLDER = "import os, sys; print(os.getpid(), flush=True); sys.stdin.readline()"


def take(pid, fd):
    """A duplicate of fd @fd of @pid (pidfd_getfd), or -1."""
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        return -1
    try:
        return libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
    finally:
        os.close(pidfd)


def stopped(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def reuse(pid, ns, fds):
    """A root process in @ns given pid number @pid (ns_last_pid), holding
    each (number, descriptor) of @fds at that number; the process (or
    None, checked)."""
    def place():
        for number, fd in fds:
            os.dup2(fd, number)
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    # The next process made in this namespace: nothing else forks now
    # (the daemon is stopped, the other processes wait for a line).
    holder = subprocess.Popen(["ip", "netns", "exec", ns, SERVER_PYTHON, "-c", HOLDER],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              preexec_fn=place, pass_fds=[n for n, _ in fds])
    rp.check(holder.pid == pid, f"a root process took pid {pid} (got {holder.pid})")
    holder.stdout.readline()
    if holder.pid != pid:
        rp.stop(holder, ask=rp.say_done)
        return None
    return holder


def passes_after(daemon, n, seconds):
    """Whether the daemon made @n more passes within @seconds (its metrics
    file, written every second)."""
    first = until(lambda: daemon.metric("sockbuf_passes_total"), 3) or 0
    return until(lambda: (daemon.metric("sockbuf_passes_total") or 0) >= first + n, seconds)


def own_checks(ns, args, tmp):
    env = dict(os.environ, SOCKBUF_RUN_FAULT="stop_before_read")
    daemon = Daemon(ns.srv, args.sockbufd, tmp, 1, env=env)
    owner = holder = None
    try:
        until(lambda: os.path.exists("/run/sockbufd/register"), 3)
        owner = subprocess.Popen(
            ["ip", "netns", "exec", ns.srv, *AS_NOBODY, SERVER_PYTHON, "-c", OWNER, rp.SRV_ADDR,
             str(PORT), str(HUGE), "/run/sockbufd/register"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = owner.stdout.readline().split()
        rp.check(line[:2] == ["answer", "0"], f"own: the owner (nobody) registered: {line}")
        if len(line) != 5:
            return
        table_fd, sock_fd = int(line[2]), int(line[3])
        rp.check(until(lambda: stopped(daemon.proc.pid), 5),
                 "own: the daemon stopped before its first read of the table (seam)")
        table, sock = take(owner.pid, table_fd), take(owner.pid, sock_fd)
        rp.check(table >= 0 and sock >= 0, "own: the owner's table and listener taken")
        s = socket.socket(fileno=os.dup(sock))
        before = rp.rcvbuf(s)
        pid = owner.pid
        rp.stop(owner, ask=rp.say_done)
        owner = None
        holder = reuse(pid, ns.srv, [(table_fd, table), (sock_fd, sock)])
        os.close(table)
        os.close(sock)
        if holder is None:
            return
        os.kill(daemon.proc.pid, signal.SIGCONT)
        rp.check(passes_after(daemon, 20, 10), "own: the daemon went on (20 passes)")
        after = rp.rcvbuf(s)
        rp.check(after == before, f"own: the root process's listener (pid {pid}, the number "
                                  f"of the exited owner) {before} -> {after} (want untouched)")
        said = [x for x in daemon.text().splitlines() if f"pid {pid} " in x]
        rp.check(not any("restored" in x for x in said),
                 f"own: no restore said for pid {pid}: {said}")
        s.close()
    finally:
        for p in (owner, holder):
            if p:
                rp.stop(p, ask=rp.say_done)
        os.kill(daemon.proc.pid, signal.SIGCONT)
        daemon.end(signal.SIGTERM)


def foreign_checks(ns, args, tmp):
    env = dict(os.environ, SOCKBUF_RUN_FAULT="stop_at_vet")
    daemon = Daemon(ns.srv, args.sockbufd, tmp, 2, env=env)
    target = lst = forger = holder = None
    try:
        until(lambda: os.path.exists("/run/sockbufd/register"), 3)
        nobody = ["ip", "netns", "exec", ns.srv, *AS_NOBODY, SERVER_PYTHON, "-c"]
        target = subprocess.Popen([*nobody, WAITER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        target.stdout.readline()
        lst = subprocess.Popen([*nobody, LISTENER, rp.SRV_ADDR, str(PORT + 1)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        fd, ino = (int(x) for x in lst.stdout.readline().split())
        sock = take(lst.pid, fd)
        rp.check(sock >= 0, "foreign: the listener taken")
        s = socket.socket(fileno=os.dup(sock))
        before = rp.rcvbuf(s)
        pid = target.pid
        forger = subprocess.Popen([*nobody, FORGER, str(pid), str(ino), str(HUGE),
                                   "/run/sockbufd/register"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        rp.check(forger.stdout.readline().strip() == "sent", "foreign: the forger offered")
        rp.check(until(lambda: stopped(daemon.proc.pid), 5),
                 "foreign: the daemon stopped after its open of the target's pidfd (seam)")
        rp.stop(target, ask=rp.say_done)
        target = None
        holder = reuse(pid, ns.srv, [(fd, sock)])
        os.close(sock)
        if holder is None:
            return
        os.kill(daemon.proc.pid, signal.SIGCONT)
        answer = forger.stdout.readline().strip()
        rp.check(answer not in ("answer 0", ""),
                 f"foreign: the daemon's answer: {answer!r} (want a refusal)")
        rp.check(passes_after(daemon, 20, 10), "foreign: the daemon went on (20 passes)")
        after = rp.rcvbuf(s)
        rp.check(after == before, f"foreign: the root process's listener (pid {pid}, the "
                                  f"number of the exited target) {before} -> {after} "
                                  f"(want untouched)")
        s.close()
    finally:
        for p in (target, lst, forger, holder):
            if p:
                rp.stop(p, ask=rp.say_done)
        os.kill(daemon.proc.pid, signal.SIGCONT)
        daemon.end(signal.SIGTERM)


CHECKS = {"own": own_checks, "foreign": foreign_checks}


def body(ns, args, tmp):
    for name in args.only or CHECKS:
        CHECKS[name](ns, args, tmp)


def main():
    ap = arguments()
    ap.add_argument("--only", action="append", choices=sorted(CHECKS))
    args = ap.parse_args()
    # A pid namespace of the test's own, where it may set ns_last_pid.
    if os.geteuid() == 0 and os.environ.get(PIDNS) != "1":
        probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            return rp.skip(f"no pid namespace: {probe.stderr.strip()}")
        os.environ[PIDNS] = "1"
        sys.stdout.flush()
        os.execvp("unshare", ["unshare", "--pid", "--fork", "--mount-proc", sys.executable,
                              *sys.argv])
    return run_checks(body, args)


if __name__ == "__main__":
    sys.exit(main())

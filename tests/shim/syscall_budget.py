#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The system calls one setsockopt(SO_RCVBUF) costs under `sockbuf run
--policy initial`, counted with strace on a program sizing a fresh TCP
socket three times (tests/shim/programs/size_repeat.c):

  preload   the first call on the socket: at most the program's own call,
            the cookie, the protocol and TCP state (asked once per
            socket), SO_BUF_LOCK read and written, the size read back and
            one fstat to publish the floor.  A repeated call: exactly the
            program's own call, the cookie, SO_BUF_LOCK read and written.
  seccomp   the supervisor's calls between receiving the notification and
            answering it: no second protocol check, no second size set, at
            most 11.
  listen    under seccomp, the supervisor's calls for a trapped listen() of
            a python3 program: exactly one readlink for a listener without
            a floor, at most 11 for one with a floor (its port noted).

A budget exceeded names every call made.  Skips (77) without strace or
where the way of running is not available.
usage: syscall_budget.py SOCKBUF SIZE_REPEAT
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)$")

PRELOAD_FIRST_MAX = 8
PRELOAD_REPEAT = [
    "setsockopt SO_RCVBUF",
    "getsockopt SO_COOKIE",
    "getsockopt SO_BUF_LOCK",
    "setsockopt SO_BUF_LOCK",
]
SUPERVISOR_MAX = 11


def calls(path):
    """(pid, name, args) per call, in the order strace saw them; a call
    split by another process's is counted once, where it started."""
    out = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m and "resumed>" not in line:
                out.append((int(m.group(1)), m.group(2), m.group(3)))
    return out


def short(call):
    """'setsockopt SO_RCVBUF', 'fstat', ... : the name and, for socket
    options, the option."""
    _, name, args = call
    if name in ("setsockopt", "getsockopt"):
        parts = [a.strip() for a in args.split(",")]
        return "%s %s" % (name, parts[2] if len(parts) > 2 else "?")
    return name


def marker(call, n):
    return call[1] == "write" and ('"mark %d\\n"' % n) in call[2]


def traced(argv, trace):
    r = subprocess.run(["strace", "-f", "-qq", "-e", "signal=none", "-o", trace] + argv,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    if r.returncode != 0 or "mark 4" not in r.stdout:
        print("run failed (%d): %s %s" % (r.returncode, r.stdout, r.stderr))
        return None
    return calls(trace)


def between(seq, pid, start, end):
    """The calls of @pid after the program's marker @start and before its
    marker @end."""
    i = next(k for k, c in enumerate(seq) if marker(c, start))
    j = next(k for k, c in enumerate(seq) if marker(c, end))
    return [c for c in seq[i + 1:j] if c[0] == pid]


def run_way(sockbuf, via, prog, tmp):
    """The calls of @prog run `--via @via` under strace, and the program's
    pid; (None, None) when the run failed."""
    seq = traced([sockbuf, "run", "-q", "--via", via, "--policy", "initial", "--", prog],
                 os.path.join(tmp, via + ".trace"))
    if seq is None:
        return None, None
    return seq, next(c[0] for c in seq if marker(c, 0))


def check_preload(sockbuf, prog, tmp):
    seq, pid = run_way(sockbuf, "preload", prog, tmp)
    if seq is None:
        return False
    ok = True
    first = [short(c) for c in between(seq, pid, 1, 2)]
    print("preload, first call: %d calls: %s" % (len(first), ", ".join(first)))
    if len(first) > PRELOAD_FIRST_MAX or first.count("setsockopt SO_RCVBUF") != 1:
        print("FAIL: more than %d calls, or the size set twice" % PRELOAD_FIRST_MAX)
        ok = False
    for n in (3, 4):
        rep = [short(c) for c in between(seq, pid, n - 1, n)]
        print("preload, repeated call: %d calls: %s" % (len(rep), ", ".join(rep)))
        if rep != PRELOAD_REPEAT:
            print("FAIL: want exactly %s" % ", ".join(PRELOAD_REPEAT))
            ok = False
    return ok


def supervisor_of(seq):
    """The thread of the trace @seq that received the first seccomp
    notification, or None (said when the trace has none; a trace that
    failed has said so already)."""
    if seq is None:
        return None
    sup = [c[0] for c in seq if c[1] == "ioctl" and "SECCOMP_IOCTL_NOTIF_RECV" in c[2]]
    if not sup:
        print("FAIL: no notification received")
        return None
    return sup[0]


def check_seccomp(sockbuf, prog, tmp):
    seq, prog_pid = run_way(sockbuf, "seccomp", prog, tmp)
    sup = supervisor_of(seq)
    if sup is None:
        return False
    window = between(seq, sup, 3, 4)
    # From the notification to the answer.
    names = [c[2] for c in window]
    try:
        i = next(k for k, a in enumerate(names) if "SECCOMP_IOCTL_NOTIF_RECV" in a)
        j = next(k for k, a in enumerate(names) if "SECCOMP_IOCTL_NOTIF_SEND" in a)
    except StopIteration:
        print("FAIL: no notification answered between the markers (program %d)" % prog_pid)
        return False
    work = [short(c) for c in window[i + 1:j]]
    print("seccomp, supervisor per repeated call: %d calls: %s" % (len(work), ", ".join(work)))
    ok = True
    if len(work) > SUPERVISOR_MAX:
        print("FAIL: more than %d calls" % SUPERVISOR_MAX)
        ok = False
    for once in ("getsockopt SO_PROTOCOL", "setsockopt SO_RCVBUF"):
        if work.count(once) > 1:
            print("FAIL: %s made %d times" % (once, work.count(once)))
            ok = False
    return ok


# A listener without a floor, then one with (SO_RCVBUF before listen()).
LISTENER_PROG = r'''
import os, socket
def mark(n):
    os.write(1, b"mark %d\n" % n)
mark(0)
sized = socket.socket()
sized.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
sized.bind(("127.0.0.1", 0))
plain = socket.socket()
plain.bind(("127.0.0.1", 0))
mark(1)
plain.listen()
mark(2)
sized.listen()
mark(3)
mark(4)
'''
LISTEN_PLAIN = ["readlink"]


def supervisor_work(seq, sup, start, end):
    """The supervisor's calls between receiving and answering the one
    notification between the program's markers @start and @end, or None."""
    window = between(seq, sup, start, end)
    names = [c[2] for c in window]
    try:
        i = next(k for k, a in enumerate(names) if "SECCOMP_IOCTL_NOTIF_RECV" in a)
        j = next(k for k, a in enumerate(names) if "SECCOMP_IOCTL_NOTIF_SEND" in a)
    except StopIteration:
        return None
    return [short(c) for c in window[i + 1:j]]


def check_listen(sockbuf, tmp):
    python = shutil.which("python3")
    if not python:
        print("listen: not checked, no python3")
        return True
    seq = traced([sockbuf, "run", "-q", "--via", "seccomp", "--policy", "initial", "--",
                  python, "-c", LISTENER_PROG], os.path.join(tmp, "listen.trace"))
    sup = supervisor_of(seq)
    if sup is None:
        return False
    ok = True
    plain = supervisor_work(seq, sup, 1, 2)
    sized = supervisor_work(seq, sup, 2, 3)
    print("listen, no floor: %s" % plain)
    print("listen, with a floor: %d calls: %s" % (len(sized or []), sized))
    if plain != LISTEN_PLAIN:
        print("FAIL: want exactly %s for a listener without a floor" % LISTEN_PLAIN)
        ok = False
    if sized is None or len(sized) > SUPERVISOR_MAX or "getsockname" not in sized:
        print("FAIL: a listener with a floor: its port not read, or more than %d calls"
              % SUPERVISOR_MAX)
        ok = False
    return ok


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    sockbuf, prog = sys.argv[1], sys.argv[2]
    if not shutil.which("strace"):
        print("SKIP: no strace (Debian package strace)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        ok = check_preload(sockbuf, prog, tmp)
        r = subprocess.run([sockbuf, "run", "-q", "--via", "seccomp", "--", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=30)
        if r.returncode != 0:
            print("seccomp: not checked, the supervisor cannot run here: %s" % r.stderr.strip())
        else:
            ok = check_seccomp(sockbuf, prog, tmp) and ok
            ok = check_listen(sockbuf, tmp) and ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

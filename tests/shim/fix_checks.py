#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`sockbuf fix PID` on a running server that locked its buffers: a
listener with SO_RCVBUF 64K (locked at 131072) and an established
connection accepted from it, between two network namespaces.  After
`sockbuf fix`, read from the kernel (`sockbuf show --json`: SO_BUF_LOCK
through pidfd_getfd, sk_rcvbuf and window scale through inet_diag): both
unlocked, the established connection's receive buffer grows past 131072
as 32 MB arrive (checksummed), it is named as keeping its small window
scale, and the next accepted connection starts unlocked with a larger
scale.  --dry-run changes nothing; --floor raises; bad input: a PID that
does not exist, a process of another user without rights, bad options.
--floor 4M --guard stays: `sockbuf show` gives the floor (by guard), a
cut made behind the server's back (pidfd_getfd + SO_RCVBUF 4096 from
here) is restored to 4M unlocked with a line for it, the guard holds no
copy of the server's sockets (its fd table, sampled 50 times, never names
one), and SIGTERM ends it with a summary that counts the restore.

usage: fix_checks.py --sockbuf PATH
Exit: 0 pass, 1 fail, 77 skip (not root, no netns).
"""
import os
import pwd
import re
import socket
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_programs as rp  # noqa: E402

PORT = 5401
BYTES = 32 << 20

SERVER = r'''
import socket, sys, zlib
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
l.bind((sys.argv[1], int(sys.argv[2])))
l.listen(8)
print("listening", l.fileno(), flush=True)
conns = []
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "accept":
        c, _ = l.accept()
        conns.append(c)
        print("accepted", c.fileno(), flush=True)
    elif cmd[0] == "repoint":
        # Another listener (receive-locked at 32768) takes the listener's
        # number: what a program may do between a listing and a write.
        import os
        n = socket.socket()
        n.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        n.bind((sys.argv[1], 0))
        n.listen(8)
        os.dup2(n.fileno(), l.fileno())
        n.close()
        print("repointed", l.fileno(), flush=True)
    elif cmd[0] == "drain":
        c, want, crc = conns[int(cmd[1])], int(cmd[2]), 0
        while want:
            b = c.recv(min(want, 1 << 16))
            if not b:
                break
            crc, want = zlib.crc32(b, crc), want - len(b)
        print("drained", want, "%08x" % crc, flush=True)
    else:
        break
'''

SENDER = ("import socket,sys; s=socket.create_connection((sys.argv[1], int(sys.argv[2])));"
          " s.sendall(sys.stdin.buffer.read()); s.close()")


def sock(j, fd):
    return next((s for s in (j or {}).get("sockets", []) if s["fd"] == fd), None)


def fix(args, *extra, user=None):
    argv = [args.sockbuf, "fix"] + list(extra)
    if user:
        argv = ["su", user, "-s", "/bin/sh", "-c", " ".join(argv)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def main():
    args = rp.root_args()
    if args is None:
        return rp.SKIP
    # Bad input first: no namespaces needed.
    gone = subprocess.Popen(["true"])
    gone.wait()
    r = fix(args, str(gone.pid))
    rp.check(r.returncode == 1 and "no such process" in r.stderr,
             f"fix of a PID that does not exist: exit {r.returncode} {r.stderr.strip()!r}")
    for bad, want in ((["--floor", "12Q", "1"], "--floor '12Q'"),
                      (["--policy", "lock", "1"], "--policy 'lock'"),
                      (["--bogus", "1"], "unknown option '--bogus'"),
                      (["x1"], "'x1' is not a PID"), ([], "no PID"),
                      (["--guard", "1"], "--guard: needs --floor SIZE"),
                      (["--guard", "--floor", "1M", "--dry-run", "1"],
                       "--guard: not with --dry-run")):
        r = fix(args, *bad)
        rp.check(r.returncode == 2 and want in r.stderr,
                 f"fix {bad}: exit {r.returncode}, names the argument ({r.stderr.strip()!r})")
    data = bytes(range(256)) * (BYTES // 256)

    def served(ns):
        srv = subprocess.Popen(["ip", "netns", "exec", ns.srv, sys.executable, "-c", SERVER,
                                rp.SRV_ADDR, str(PORT)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        senders = []
        try:
            scenario(args, ns, srv, senders, data)
        finally:
            for p in senders + [srv]:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        repointed(args, ns)

    return rp.in_namespaces(served) or rp.verdict()


def scenario(args, ns, srv, senders, data):
    def say(line):
        srv.stdin.write(line + "\n")
        srv.stdin.flush()
        return srv.stdout.readline().split()

    def send():
        p = subprocess.Popen(["ip", "netns", "exec", ns.cli, sys.executable, "-c", SENDER,
                              rp.SRV_ADDR, str(PORT)], stdin=subprocess.PIPE)
        senders.append(p)
        p.stdin.write(data)  # the sender holds it until the server reads
        p.stdin.close()
        return p

    first = srv.stdout.readline().split()
    lfd = int(first[1])
    pid = srv.pid
    feeder = __import__("threading").Thread(target=send)
    feeder.start()
    cfd1 = int(say("accept")[1])
    before = rp.show(args.sockbuf, pid)
    lst, c1 = sock(before, lfd), sock(before, cfd1)
    rp.check(lst and c1 and lst["lock_bits"] == 2 and c1["lock_bits"] == 2 and
             c1["rcvbuf"] == 131072,
             f"before: listener and connection receive-locked at 131072 "
             f"({lst and lst['lock_bits']}, {c1 and c1['lock_bits']}, {c1 and c1['rcvbuf']})")
    wscale1 = c1["tcp_info"]["rcv_wscale"] if c1 else -1

    r = fix(args, str(pid), user="nobody") if pwd.getpwnam("nobody") else None
    rp.check(r is not None and r.returncode == 1 and "ptrace attach" in r.stderr,
             f"fix as another user without rights: exit {r and r.returncode} "
             f"{r and r.stderr.strip()!r}")
    r = fix(args, str(pid), "--dry-run")
    after_dry = rp.show(args.sockbuf, pid)
    rp.check(r.returncode == 0 and f"would change fd {cfd1} ESTABLISHED" in r.stdout and
             sock(after_dry, cfd1)["lock_bits"] == 2 and sock(after_dry, lfd)["lock_bits"] == 2,
             f"--dry-run says and changes nothing: {r.stdout.strip()!r}")

    r = fix(args, str(pid))
    print(r.stdout, end="")
    rp.check(r.returncode == 0 and f"changed fd {lfd} LISTEN" in r.stdout and
             f"changed fd {cfd1} ESTABLISHED" in r.stdout,
             f"fix: exit {r.returncode}, listener and connection changed")
    rp.check(f"keeps a small window: fd {cfd1} ESTABLISHED" in r.stdout,
             "fix names the connection that keeps its small window scale")
    after = rp.show(args.sockbuf, pid)
    rp.check(sock(after, lfd)["lock_bits"] == 0 and sock(after, cfd1)["lock_bits"] == 0,
             "after: listener and connection unlocked (show)")
    got = say(f"drain 0 {len(data)}")
    feeder.join()
    rp.check(got == ["drained", "0", f"{zlib.crc32(data):08x}"],
             f"32 MB drained, checksum intact ({got})")
    grown = sock(rp.show(args.sockbuf, pid), cfd1)
    rp.check(grown and grown["rcvbuf"] > 131072 and grown["lock_bits"] == 0,
             f"the established connection's buffer grew: {grown and grown['rcvbuf']}")

    feeder = __import__("threading").Thread(target=send)
    feeder.start()
    cfd2 = int(say("accept")[1])
    c2 = sock(rp.show(args.sockbuf, pid), cfd2)
    rp.check(c2 and c2["lock_bits"] == 0,
             f"the next accepted connection starts unlocked ({c2 and c2['lock_bits']})")
    rp.check(c2 and c2["tcp_info"]["rcv_wscale"] > wscale1,
             f"and with a larger window scale ({c2 and c2['tcp_info']['rcv_wscale']} > "
             f"{wscale1})")
    r = fix(args, "--floor", "4M", str(pid))
    c2f = sock(rp.show(args.sockbuf, pid), cfd2)
    rp.check(r.returncode == 0 and c2f and c2f["rcvbuf"] >= 4 << 20 and c2f["lock_bits"] == 0,
             f"--floor 4M raised it unlocked ({c2f and c2f['rcvbuf']}): {r.stdout.strip()!r}")
    say(f"drain 1 {len(data)}")
    feeder.join()
    guarded(args, pid, cfd2, say)
    say("quit")
    rp.check(srv.wait(timeout=10) == 0, "server exit 0")


def repointed(args, ns):
    """The listener's number re-pointed at another listener between fix's
    listing and its write: fix must not write the one that took it."""
    srv = subprocess.Popen(["ip", "netns", "exec", ns.srv, sys.executable, "-c", SERVER,
                            rp.SRV_ADDR, str(PORT + 1)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        lfd = int(srv.stdout.readline().split()[1])
        env = dict(os.environ, SOCKBUF_RUN_FAULT="fix_hold_after_listing")
        fx = subprocess.Popen([args.sockbuf, "fix", str(srv.pid)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
        held = fx.stderr.readline().strip()
        srv.stdin.write("repoint\n")
        srv.stdin.flush()
        moved = srv.stdout.readline().split()
        out, err = fx.communicate("\n", timeout=30)
        other = sock(rp.show(args.sockbuf, srv.pid), lfd)
        rp.check(held == "listed" and moved == ["repointed", str(lfd)],
                 f"re-pointed between listing and write ({held!r}, {moved})")
        rp.check(f"not changed fd {lfd} LISTEN" in out and "names another socket now" in out,
                 f"fix says the number names another socket: {out.strip()!r} {err.strip()!r}")
        rp.check(other and other["lock_bits"] == 2 and other["rcvbuf"] == 32768,
                 f"the listener that took the number is untouched: locked at 32768 "
                 f"({other and other['lock_bits']}, {other and other['rcvbuf']})")
    finally:
        srv.stdin.write("quit\n")
        srv.stdin.flush()
        srv.wait(timeout=10)


def guarded(args, pid, cfd, say):
    """--floor 4M --guard on the server's connection @cfd (drained, still
    open)."""
    g = subprocess.Popen([args.sockbuf, "fix", "--floor", "4M", "--guard", str(pid)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = g.stdout.readline()
        while line and not line.startswith("guarding"):
            line = g.stdout.readline()
        rp.check(line.startswith("guarding"), f"--guard: stays and says so ({line.strip()!r})")
        fl = (sock(rp.show(args.sockbuf, pid), cfd) or {}).get("floor")
        rp.check(fl and fl["rcv"] == 4 << 20 and fl["by"] == "guard",
                 f"--guard: show gives fd {cfd} the floor 4M by guard ({fl})")
        pidfd = os.pidfd_open(pid)
        dup = rp.libc.syscall(rp.SYS_PIDFD_GETFD, pidfd, cfd, 0)
        os.close(pidfd)
        rp.check(dup >= 0, "--guard: took the connection from here to cut it")
        if dup < 0:
            return
        c = socket.socket(fileno=dup)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        cut = c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        end = time.monotonic() + 2
        now = cut
        while now < 4 << 20 and time.monotonic() < end:
            time.sleep(0.001)
            now = c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        lock = c.getsockopt(socket.SOL_SOCKET, rp.SO_BUF_LOCK)
        c.close()
        rp.check(cut < 4 << 20 and now >= 4 << 20 and lock == 0,
                 f"--guard: cut to {cut}, restored to {now} unlocked (lock {lock}) in 2 s")
        line = g.stdout.readline()
        rp.check(line.startswith(f"restored fd {cfd}: rcv 8192 -> 4194304"), f"--guard: a line for it ({line!r})")
        theirs = {os.readlink(f"/proc/{pid}/fd/{f}") for f in os.listdir(f"/proc/{pid}/fd")}
        theirs = {t for t in theirs if t.startswith("socket:")}
        held = set()
        for _ in range(50):
            for f in os.listdir(f"/proc/{g.pid}/fd"):
                try:
                    held.add(os.readlink(f"/proc/{g.pid}/fd/{f}"))
                except OSError:
                    pass
            time.sleep(0.002)
        rp.check(theirs and not (held & theirs),
                 f"--guard: holds none of the server's {len(theirs)} sockets "
                 f"({sorted(held & theirs)})")
    finally:
        g.terminate()
        out, err = g.communicate(timeout=10)
    m = re.search(r"guard ended \(SIGTERM\): (\d+) passes, (\d+) below the floor, "
                  r"(\d+) restored", out)
    rp.check(g.returncode == 0 and m is not None and int(m.group(3)) >= 1,
             f"--guard: SIGTERM ends it, exit {g.returncode}, summary {m and m.group(0)!r} "
             f"{err.strip()!r}")


if __name__ == "__main__":
    sys.exit(main())

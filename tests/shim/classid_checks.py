#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A socket taken with pidfd_getfd() keeps its cgroup-v1 net_cls classid.

In its own mount and network namespaces: a v1 net_cls,net_prio hierarchy
mounted on a temporary directory, a child cgroup with classid 0x100001,
a process in it owning a loopback TCP connection whose receive buffer it
locked at 4096.  `sockbuf show PID` (which takes each socket for its
lock bits), then `sockbuf fix PID --floor 1M` (which takes the
connection again to raise it) changes the connection; its classid, read
back from the kernel through inet_diag (`ss --tos`, INET_DIAG_CLASS_ID),
is still 0x100001 after each.
The kernel's receive path gives a taken socket the taker's classid (0
here) unless the taker joins the owner's cgroup for the take.  The child
cgroup is removed and the hierarchy unmounted at the end.

usage: classid_checks.py --sockbuf PATH
Exit: 0 pass, 1 fail, 77 skip (not root, net_cls absent or bound elsewhere).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

PORT = 5411
CLASSID = 0x100001

OWNER = r'''
import socket, sys
sys.stdin.readline()
l = socket.socket()
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(1)
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
a, _ = l.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
print(a.fileno(), flush=True)
sys.stdin.readline()
'''


def skip(why):
    print(f"SKIP: {why}")
    return 77


def classid(port):
    """The class_id inet_diag gives for the accepted end (local PORT)."""
    out = subprocess.run(["ss", "-tnH", "--tos", "state", "established",
                          f"sport = :{port}"], capture_output=True, text=True,
                         timeout=10).stdout
    m = re.search(r"class_id:(\S+)", out)
    return int(m.group(1), 0) if m else None, out.strip()


def net_cls_row():
    with open("/proc/cgroups") as f:
        for line in f:
            cols = line.split()
            if cols and cols[0] == "net_cls":
                return cols
    return None


def inside(args):
    row = net_cls_row()
    if not row or row[3] != "1":
        return skip("no net_cls controller in /proc/cgroups")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    top = tempfile.mkdtemp(prefix="sockbuf-netcls.")
    r = subprocess.run(["mount", "-t", "cgroup", "-o", "net_cls,net_prio", "sockbuf-test",
                        top], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        os.rmdir(top)
        return skip(f"cannot mount a v1 net_cls,net_prio hierarchy (bound to another "
                    f"hierarchy or to cgroup v2): {r.stderr.strip()}")
    cg = os.path.join(top, f"sockbuf-classid-{os.getpid()}")
    owner = None
    failed = []
    try:
        os.mkdir(cg)
        with open(os.path.join(cg, "net_cls.classid"), "w") as f:
            f.write(f"{CLASSID:#x}")
        owner = subprocess.Popen([sys.executable, "-c", OWNER, str(PORT)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(owner.pid))
        owner.stdin.write("go\n")
        owner.stdin.flush()
        fd = owner.stdout.readline().strip()
        before, out = classid(PORT)
        if before != CLASSID:
            failed.append(f"the owner's connection starts with classid {before} "
                          f"(want {CLASSID:#x}): {out!r}")
        r = subprocess.run([args.sockbuf, "show", str(owner.pid)], capture_output=True,
                           text=True, timeout=30)
        shown, out = classid(PORT)
        if r.returncode != 0 or shown != CLASSID:
            failed.append(f"classid after `sockbuf show` (exit {r.returncode}): {shown!r}, "
                          f"want {CLASSID:#x} ({out!r})")
        r = subprocess.run([args.sockbuf, "fix", str(owner.pid), "--floor", "1M"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or f"changed fd {fd} " not in r.stdout:
            failed.append(f"fix: exit {r.returncode}, fd {fd} changed? {r.stdout!r} "
                          f"{r.stderr!r}")
        after, out = classid(PORT)
        if after != CLASSID:
            failed.append(f"classid after `sockbuf fix`: {after!r}, want {CLASSID:#x} "
                          f"({out!r})")
        else:
            print(f"ok: classid {after:#x} kept through `sockbuf fix` (fd {fd})")
    finally:
        if owner:
            owner.kill()
            owner.wait()
        if os.path.isdir(cg):
            os.rmdir(cg)
        subprocess.run(["umount", top], timeout=10)
        os.rmdir(top)
    for f in failed:
        print("FAIL:", f)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sockbuf", required=True)
    ap.add_argument("--inside", action="store_true")
    args = ap.parse_args()
    if args.inside:
        return inside(args)
    if os.geteuid() != 0:
        return skip("needs root (a cgroup mount, network namespace)")
    r = subprocess.run(["unshare", "--mount", "--net", "--propagation", "private",
                        sys.executable, os.path.abspath(__file__), "--sockbuf", args.sockbuf,
                        "--inside"], timeout=90)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A socket taken with pidfd_getfd() keeps its cgroup-v1 net_cls classid
and net_prio index.

In its own mount and network namespaces: a v1 net_cls,net_prio hierarchy
mounted on a temporary directory, a child cgroup with classid 0x100001,
a process in it owning a loopback TCP connection whose receive buffer it
locked at 4096.  `sockbuf show PID` (which takes each socket for its
lock bits), then `sockbuf fix PID --floor 1M` (which takes the
connection again to raise it) changes the connection; its classid, read
back from the kernel through inet_diag (`ss --tos`, INET_DIAG_CLASS_ID),
is still 0x100001 after each.
The net_prio part runs in the initial network namespace (its own mount
namespace), where alone the kernel applies net_prio.ifpriomap: a veth
pair of the test's own (its other end in a network namespace it makes,
198.18.251.0/30), an htb qdisc on its end, which puts a packet whose
priority is one of its class ids in that class; the child cgroup maps
that end to priority 0x10001 (class 1:1; the root cgroup's 0 goes to
the default class, 1:2).  1 MiB the owner's connection sends after
`sockbuf fix` goes out through class 1:1: its net_prio index is still
the owner's cgroup's.
The kernel's receive path gives a taken socket the taker's classid (0
here) and net_prio index (the root cgroup's) unless the taker joins the
owner's cgroups for the take.  The child
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
PRIO = 0x10001  # skb->priority 1:1: htb's class of that id

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

# The net_prio part: a connection from this (the initial) network
# namespace to argv[1]:argv[2] over the test's veth; its receive buffer
# locked at 4096; on each line "send", 1 MiB sent and "sent" once the
# sink said it has it all.
PRIO_OWNER = r'''
import socket, sys
sys.stdin.readline()
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
print(c.fileno(), flush=True)
for line in sys.stdin:
    if line.strip() != "send":
        break
    c.sendall(bytes(1 << 20))
    assert c.recv(1) == b"k"
    print("sent", flush=True)
'''

# The sink, in the test's network namespace: answers each MiB with "k".
PRIO_SINK = r'''
import socket, sys
l = socket.socket()
l.bind((sys.argv[1], int(sys.argv[2])))
l.listen(1)
print("listening", flush=True)
a, _ = l.accept()
got = 0
while True:
    b = a.recv(65536)
    if not b:
        break
    got += len(b)
    if got >= 1 << 20:
        got -= 1 << 20
        a.sendall(b"k")
'''


def class_bytes(dev):
    """Bytes sent through each class of @dev's htb qdisc ({"1:1": n, ...})."""
    out = subprocess.run(["tc", "-s", "class", "show", "dev", dev], capture_output=True,
                         text=True, timeout=10).stdout
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"class htb (\S+) .*?\n\s*Sent (\d+) bytes", out)}


def sent_through(owner, dev):
    """The bytes of 1 MiB the owner's connection sends, by class of @dev."""
    before = class_bytes(dev)
    owner.stdin.write("send\n")
    owner.stdin.flush()
    owner.stdout.readline()
    after = class_bytes(dev)
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


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


def prio_inside(args):
    """The net_prio index: the kernel applies net_prio.ifpriomap to devices
    of the initial network namespace only, so this part runs there (its
    own mount namespace), over a veth pair of its own whose other end is
    in a network namespace it makes, with an htb qdisc on its end only."""
    row = net_cls_row()
    if not row or row[3] != "1":
        return skip("no net_cls,net_prio controller in /proc/cgroups")
    tag = f"sbp{os.getpid() % 100000}"
    ns, dev, peer = f"{tag}ns", f"{tag}a", f"{tag}b"
    top = tempfile.mkdtemp(prefix="sockbuf-netprio.")
    r = subprocess.run(["mount", "-t", "cgroup", "-o", "net_cls,net_prio", "sockbuf-test",
                        top], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        os.rmdir(top)
        return skip(f"cannot mount a v1 net_cls,net_prio hierarchy: {r.stderr.strip()}")
    cg = os.path.join(top, f"sockbuf-netprio-{os.getpid()}")
    owner = sink = None
    failed = []
    try:
        for cmd in (["ip", "netns", "add", ns],
                    ["ip", "link", "add", dev, "type", "veth", "peer", "name", peer],
                    ["ip", "link", "set", peer, "netns", ns],
                    ["ip", "addr", "add", "198.18.251.1/30", "dev", dev],
                    ["ip", "link", "set", dev, "up"],
                    ["ip", "-n", ns, "addr", "add", "198.18.251.2/30", "dev", peer],
                    ["ip", "-n", ns, "link", "set", peer, "up"],
                    ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
                     "default", "2"],
                    ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                     "rate", "10gbit"],
                    ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:2", "htb",
                     "rate", "10gbit"]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            if r.returncode != 0:
                return skip(f"{' '.join(cmd)}: {r.stderr.strip()}")
        os.mkdir(cg)
        with open(os.path.join(cg, "net_prio.ifpriomap"), "w") as f:
            f.write(f"{dev} {PRIO}")
        sink = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", PRIO_SINK,
                                 "198.18.251.2", str(PORT)], stdout=subprocess.PIPE, text=True)
        sink.stdout.readline()
        owner = subprocess.Popen([sys.executable, "-c", PRIO_OWNER, "198.18.251.2", str(PORT)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(owner.pid))
        owner.stdin.write("go\n")
        owner.stdin.flush()
        fd = owner.stdout.readline().strip()
        first = sent_through(owner, dev)
        if first.get("1:1", 0) < 1 << 20:
            return skip(f"net_prio.ifpriomap '{dev} {PRIO:#x}' did not steer the owner's "
                        f"traffic into class 1:1 (bytes by class: {first})")
        print(f"ok: before: 1 MiB sent, bytes by class of {dev} {first}")
        r = subprocess.run([args.sockbuf, "fix", str(owner.pid), "--floor", "1M"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or f"changed fd {fd} " not in r.stdout:
            failed.append(f"fix: exit {r.returncode}, fd {fd} changed? {r.stdout!r} "
                          f"{r.stderr!r}")
        then = sent_through(owner, dev)
        if then.get("1:1", 0) < 1 << 20 or then.get("1:2", 0) >= 1 << 20:
            failed.append(f"net_prio index after `sockbuf fix`: 1 MiB sent went out by class "
                          f"{then} (want 1:1: priority {PRIO:#x}, the owner's cgroup's)")
        else:
            print(f"ok: net_prio index kept through `sockbuf fix`: 1 MiB sent, bytes by "
                  f"class {then}")
    finally:
        for p in (owner, sink):
            if p:
                p.kill()
                p.wait()
        if os.path.isdir(cg):
            os.rmdir(cg)
        subprocess.run(["umount", top], timeout=10)
        os.rmdir(top)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", dev], capture_output=True, timeout=10)
    for f in failed:
        print("FAIL:", f)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sockbuf", required=True)
    ap.add_argument("--inside", action="store_true")
    ap.add_argument("--prio", action="store_true")
    args = ap.parse_args()
    if args.inside:
        return prio_inside(args) if args.prio else inside(args)
    if os.geteuid() != 0:
        return skip("needs root (a cgroup mount, network namespace)")
    rc = subprocess.run(["unshare", "--mount", "--net", "--propagation", "private",
                         sys.executable, os.path.abspath(__file__), "--sockbuf", args.sockbuf,
                         "--inside"], timeout=90).returncode
    prio = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                           os.path.abspath(__file__), "--sockbuf", args.sockbuf, "--inside",
                           "--prio"], timeout=90).returncode
    if 1 in (rc, prio):
        return 1
    return 0 if 0 in (rc, prio) else 77


if __name__ == "__main__":
    sys.exit(main())

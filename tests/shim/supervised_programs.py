#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`sockbuf run` on programs the LD_PRELOAD shim cannot reach: a Go server
built here with CGO_ENABLED=0 (static) and =1 (dynamic, cgo: Go still
makes its own system calls) and a C server linked with -static.  Each sets
SO_RCVBUF to 128K on its listener and on the accepted connection.  Each is
run plain and under `sockbuf run --policy initial` (which must pick the
seccomp supervisor by itself), between two network namespaces joined by a
veth pair with 5 ms of netem delay each way where sch_netem exists; 32 MB are sent and
checksummed (CRC-32).  Assertions come from the kernel's side (SO_BUF_LOCK
through pidfd_getfd, sk_rcvbuf and the window scale through inet_diag):
plain runs lock at 262144 with a small window scale; supervised runs stay
unlocked, grow, and get a larger window scale, while the program's own
read-back stays 262144 in both.

usage: supervised_programs.py --sockbuf PATH --cc CC --build-dir DIR --src DIR
Exit: 0 pass, 1 fail, 77 skip (not root, no go, no netns, no supervisor).
"""
import os
import re
import shutil
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_programs as rp  # noqa: E402  (namespaces, show, lock_bits, check)

PORT = 5301
BYTES = 32 << 20
SIZE = 131072
DELAY = "5ms"


def build(args):
    """The three servers, or (None, reason)."""
    out = {}
    go = shutil.which("go")
    if not go:
        return None, "go not installed (Debian package golang-go)"
    env = dict(os.environ, GOCACHE=os.path.join(args.build_dir, "gocache"),
               GOPATH=os.path.join(args.build_dir, "gopath"), GOTOOLCHAIN="local",
               GO111MODULE="off", GOFLAGS="")
    src = os.path.join(args.src, "bufserver.go")
    for cgo in ("0", "1"):
        exe = os.path.join(args.build_dir, f"bufserver-go-cgo{cgo}")
        r = subprocess.run([go, "build", "-o", exe, src], env=dict(env, CGO_ENABLED=cgo),
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return None, f"go build (CGO_ENABLED={cgo}) failed: {r.stderr[-400:]}"
        out["go static" if cgo == "0" else "go cgo"] = exe
    exe = os.path.join(args.build_dir, "bufserver-c-static")
    r = subprocess.run([args.cc, "-O2", "-static", "-o", exe,
                        os.path.join(args.src, "bufserver.c")],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, f"static C link failed (libc6-dev's libc.a?): {r.stderr[-400:]}"
    out["c static"] = exe
    return out, ""


def payload():
    block = bytes(range(256)) * 4096  # 1 MB
    return block * (BYTES // len(block))


def entry_for(j, pred):
    return next((s for s in (j or {}).get("sockets", []) if pred(s)), None)


def one_run(ns, args, label, exe, supervised, data, crc):
    """Runs one server; returns what the kernel showed, or None."""
    argv = [exe, f"{rp.SRV_ADDR}:{PORT}", str(BYTES), str(SIZE)]
    if supervised:
        argv = [args.sockbuf, "run", "--policy", "initial", "--"] + argv
    ns.flush_metrics()
    srv = subprocess.Popen(["ip", "netns", "exec", ns.srv] + argv, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = {}
    try:
        first = srv.stdout.readline().strip()
        m = re.match(r"listening pid=(\d+) readback=(-?\d+)$", first)
        rp.check(m is not None, f"{label}: started ({first!r})")
        if not m:
            return None
        pid, readback = int(m.group(1)), int(m.group(2))
        rp.check(readback == 2 * SIZE,
                 f"{label}: listener SO_RCVBUF reads back {readback} (want {2 * SIZE})")
        lst = entry_for(rp.show(args.sockbuf, pid),
                        lambda s: s["state"] == "LISTEN" and s["local"].endswith(f":{PORT}"))
        rp.check(lst is not None and lst["lock_bits"] >= 0,
                 f"{label}: listener seen with its lock bits")
        result["listener_lock"] = lst["lock_bits"] if lst else -1
        t0 = time.monotonic()
        sender = subprocess.run(
            ["ip", "netns", "exec", ns.cli, sys.executable, "-c",
             "import socket,sys; s=socket.create_connection((sys.argv[1], int(sys.argv[2])));"
             " s.sendall(sys.stdin.buffer.read()); s.close()", rp.SRV_ADDR, str(PORT)],
            input=data, capture_output=True, timeout=60)
        rp.check(sender.returncode == 0, f"{label}: sender exit {sender.returncode}")
        line = srv.stdout.readline().strip()
        secs = time.monotonic() - t0
        m = re.match(r"received (\d+) crc32=([0-9a-f]+) fd=(\d+) readback=(-?\d+)$", line)
        rp.check(m is not None and int(m.group(1)) == BYTES and int(m.group(2), 16) == crc,
                 f"{label}: {BYTES} bytes, checksum intact ({line!r}, want {crc:08x})")
        if not m:
            return None
        fd, cread = int(m.group(3)), int(m.group(4))
        rp.check(cread == 2 * SIZE,
                 f"{label}: accepted SO_RCVBUF reads back {cread} (want {2 * SIZE})")
        acc = entry_for(rp.show(args.sockbuf, pid), lambda s: s["fd"] == fd)
        direct = rp.lock_bits(pid, fd)
        rp.check(acc is not None and direct is not None,
                 f"{label}: accepted socket fd {fd} seen")
        if acc is None or direct is None:
            return None
        result.update(lock=direct[0], rcvbuf=direct[1],
                      wscale=acc.get("tcp_info", {}).get("rcv_wscale", -1),
                      mbps=BYTES / secs / 1e6)
        print(f"{label}: {result['mbps']:.1f} MB/s, lock {result['lock']}, rcvbuf "
              f"{result['rcvbuf']}, rcv_wscale {result['wscale']}, listener lock "
              f"{result['listener_lock']}", flush=True)
        srv.stdin.write("\n")
        srv.stdin.flush()
        rc = srv.wait(timeout=20)
        err = srv.stderr.read()
        rp.check(rc == 0, f"{label}: exit {rc} {err[-300:]!r}")
        if supervised:
            rp.check("via seccomp supervisor" in err,
                     f"{label}: says it runs via the seccomp supervisor ({err.strip()!r})")
        return result
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


def main():
    args = rp.root_args(("--cc", "cc"), "--build-dir", "--src")
    if args is None:
        return rp.SKIP
    if not shutil.which("ip") or not shutil.which("tc"):
        return rp.skip("ip or tc (iproute2) not installed")
    why = rp.seccomp_missing(args.sockbuf)
    if why:
        return rp.skip(why)
    os.makedirs(args.build_dir, exist_ok=True)
    programs, why = build(args)
    if programs is None:
        return rp.skip(why)
    data = payload()
    crc = zlib.crc32(data)
    def each_program(ns):
        for n, dev in ((ns.srv, ns.veth_s), (ns.cli, ns.veth_c)):
            r = rp.run("ip", "netns", "exec", n, "tc", "qdisc", "add", "dev", dev,
                       "root", "netem", "delay", DELAY, "limit", "10000", check_rc=False)
            if r.returncode != 0:
                print(f"note: no netem here ({r.stderr.strip()}): no added delay; "
                      "the lock, growth and window-scale checks stand", flush=True)
                break
        for label, exe in programs.items():
            plain = one_run(ns, args, f"{label} plain", exe, False, data, crc)
            sup = one_run(ns, args, f"{label} supervised", exe, True, data, crc)
            if not plain or not sup:
                continue
            rp.check(plain["listener_lock"] & 2 == 2 and plain["lock"] & 2 == 2,
                     f"{label} plain: listener and connection receive-locked "
                     f"({plain['listener_lock']}, {plain['lock']})")
            rp.check(plain["rcvbuf"] == 2 * SIZE,
                     f"{label} plain: receive buffer stuck at {plain['rcvbuf']}")
            rp.check(sup["listener_lock"] == 0 and sup["lock"] == 0,
                     f"{label} supervised: listener and connection unlocked "
                     f"({sup['listener_lock']}, {sup['lock']})")
            rp.check(sup["rcvbuf"] > 2 * SIZE,
                     f"{label} supervised: receive buffer grew to {sup['rcvbuf']}")
            rp.check(sup["wscale"] > plain["wscale"],
                     f"{label}: window scale {sup['wscale']} supervised, "
                     f"{plain['wscale']} plain")

    return rp.in_namespaces(each_program) or rp.verdict()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The programs of the linger attack (loop_checks.py), one per mode:

  sink PORT            listens on PORT with a 4 KiB receive buffer, accepts
                       and never reads; prints "listening".
  attacker ADDR PORT N up to N connections to ADDR:PORT, each: its send
                       buffer sized with setsockopt() (the shim publishes
                       the floor), SO_LINGER 3600 s, filled until the peer's
                       window closes, then cut from behind the shim (the
                       raw system call) and closed the moment the daemon
                       raises it back: the daemon's copy may then be the
                       socket's last reference.  One line per try:
                       "try K raised MS" or "try K not raised".
  canary ADDR PORT     one connection whose receive buffer is sized (the
                       floor); on each line read from standard input it
                       cuts it from behind the shim and prints "back MS"
                       or "not back" (2 s).

Every wait is bounded.
"""
import ctypes
import os
import socket
import struct
import sys
import threading
import time

SO_BUF_LOCK = 72
SYS_SETSOCKOPT = {"x86_64": 54, "aarch64": 208}.get(os.uname().machine)
SYS_GETSOCKOPT = {"x86_64": 55, "aarch64": 209}.get(os.uname().machine)
libc = ctypes.CDLL(None, use_errno=True)


def raw_setsockopt(fd, opt, value):
    """setsockopt() straight to the kernel: the shim does not see it."""
    v = ctypes.c_int(value)
    if libc.syscall(SYS_SETSOCKOPT, fd, socket.SOL_SOCKET, opt, ctypes.byref(v), 4) != 0:
        raise OSError(ctypes.get_errno(), "setsockopt")


def raw_getsockopt(fd, opt):
    """getsockopt() straight to the kernel (the shim answers what the
    program asked for)."""
    v, n = ctypes.c_int(0), ctypes.c_int(4)
    if libc.syscall(SYS_GETSOCKOPT, fd, socket.SOL_SOCKET, opt, ctypes.byref(v),
                    ctypes.byref(n)) != 0:
        raise OSError(ctypes.get_errno(), "getsockopt")
    return v.value


def cut_fd(fd, opt):
    raw_setsockopt(fd, opt, 1024)
    raw_setsockopt(fd, SO_BUF_LOCK, 0)
    return raw_getsockopt(fd, opt)


def cut(s, opt):
    return cut_fd(s.fileno(), opt)


def sink(port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ls.bind(("0.0.0.0", port))
    ls.listen(256)
    print("listening", flush=True)
    held = []
    ls.settimeout(120)
    try:
        while True:
            held.append(ls.accept()[0])
    except OSError as e:
        print(f"sink: {e}", file=sys.stderr)


def attacker(addr, port, tries):
    for k in range(tries):
        s = socket.create_connection((addr, port), timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)  # published
        floor = raw_getsockopt(s.fileno(), socket.SO_SNDBUF)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
        s.setblocking(False)
        sent = 0
        end = time.monotonic() + 5
        while time.monotonic() < end and sent < (64 << 20):
            try:
                sent += s.send(bytes(65536))
            except BlockingIOError:
                break
        # Cut until the daemon serves it (the table is read within
        # --reread), each cut watched for 1 s; closed at the raise, on a
        # thread of its own: where the attacker's close is the last, that
        # thread sleeps the linger time, the tries go on.
        raised = []

        def race(fd=s.detach()):
            t0 = time.monotonic()
            while time.monotonic() < t0 + 3:
                cut_fd(fd, socket.SO_SNDBUF)
                t1 = time.monotonic()
                while time.monotonic() < t1 + 1:
                    if raw_getsockopt(fd, socket.SO_SNDBUF) >= floor:
                        raised.append((time.monotonic() - t1) * 1000)
                        os.close(fd)
                        return
            os.close(fd)

        t = threading.Thread(target=race, daemon=True)
        t.start()
        t.join(4)
        if not raised:
            print(f"try {k} not raised (floor {floor}, sent {sent})", flush=True)
            return
        print(f"try {k} raised {raised[0]:.1f} (sent {sent})", flush=True)


def canary(addr, port):
    s = socket.create_connection((addr, port), timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # published
    floor = raw_getsockopt(s.fileno(), socket.SO_RCVBUF)
    print(f"ready {floor} pid={os.getpid()} fd={s.fileno()}", flush=True)
    for _ in sys.stdin:
        low = cut(s, socket.SO_RCVBUF)
        t0 = time.monotonic()
        back = None
        while time.monotonic() < t0 + 2:
            if raw_getsockopt(s.fileno(), socket.SO_RCVBUF) >= floor:
                back = (time.monotonic() - t0) * 1000
                break
            time.sleep(0.001)
        print(f"back {back:.1f}" if back is not None else f"not back (cut to {low})",
              flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "sink":
        sink(int(sys.argv[2]))
    elif mode == "attacker":
        attacker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        canary(sys.argv[2], int(sys.argv[3]))

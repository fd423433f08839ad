#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Processes with names chosen to break sockbufd's metrics and log
(loop_checks.py), run under `sockbuf run --via preload`:

  NAME...   one child per NAME (hex-encoded bytes: prctl(PR_SET_NAME)
            takes any bytes), each sizing one listener (its floor
            published), cutting it from behind the shim once, printing
            "ready PID" and waiting for standard input to close.

Every wait is bounded.
"""
import ctypes
import os
import socket
import sys

PR_SET_NAME = 15
SO_BUF_LOCK = 72
SYS_SETSOCKOPT = {"x86_64": 54, "aarch64": 208}.get(os.uname().machine)
libc = ctypes.CDLL(None, use_errno=True)


def child(name, w):
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # published
    s.bind(("127.0.0.1", 0))
    s.listen()  # in the daemon's dump
    for opt, v in ((socket.SO_RCVBUF, 1024), (SO_BUF_LOCK, 0)):
        c = ctypes.c_int(v)
        libc.syscall(SYS_SETSOCKOPT, s.fileno(), socket.SOL_SOCKET, opt, ctypes.byref(c), 4)
    os.write(w, f"ready {os.getpid()}\n".encode())
    os.read(0, 1)  # until the parent's standard input closes
    os._exit(0)


def main():
    kids = []
    r, w = os.pipe()
    for h in sys.argv[1:]:
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(bytes.fromhex(h), w)
        kids.append(pid)
    os.close(w)
    f = os.fdopen(r)
    for _ in kids:
        print(f.readline().strip(), flush=True)
    sys.stdin.read()
    for k in kids:
        os.waitpid(k, 0)


if __name__ == "__main__":
    main()

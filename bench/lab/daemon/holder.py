#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Holds PAIRS established loopback TCP connections, both ends sized with
SO_RCVBUF 64K (under `sockbuf run --policy initial` each end then has a
published floor), says "ready N" and waits for a line on stdin.

usage: holder.py PAIRS PORT"""
import resource
import socket
import sys


def main():
    pairs, port = int(sys.argv[1]), int(sys.argv[2])
    need = 2 * pairs + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(1024)
    held = []
    for _ in range(pairs):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        c.connect(("127.0.0.1", port))
        a, _ = lsock.accept()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        held += [c, a]
    print(f"ready {len(held)}", flush=True)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A listener that sizes its receive buffer the classic way: SO_RCVBUF on
the listening socket before listen(), then the read-back check programs
like iperf3 make.  Receives BYTES from one client, says so, and waits for a
line on stdin so the test can look at its sockets from outside.

usage: py_listener.py ADDRESS PORT BYTES
"""
import socket
import sys

REQUEST = 65536


def main():
    addr, port, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, REQUEST)
    readback = lsock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    if readback < 2 * REQUEST:
        print(f"error: SO_RCVBUF reads back {readback} < {2 * REQUEST}", flush=True)
        return 3
    lsock.bind((addr, port))
    lsock.listen(1)
    print(f"listening readback={readback}", flush=True)
    conn, _ = lsock.accept()
    buf = bytearray(1 << 20)
    got = 0
    while got < want:
        n = conn.recv_into(buf)
        if n == 0:
            break
        got += n
    print(f"received {got} fd={conn.fileno()}", flush=True)
    sys.stdin.readline()
    conn.close()
    lsock.close()
    return 0 if got == want else 4


if __name__ == "__main__":
    sys.exit(main())

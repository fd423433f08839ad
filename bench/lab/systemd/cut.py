#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cut a socket of another process from outside, as the kernel's
moderation or a careless library leaves it, and time its way back.

  cut.py PID FD FLOOR [SECONDS]

Takes a duplicate of fd FD of PID (pidfd_getfd: root, or CAP_SYS_PTRACE),
sets SO_RCVBUF to 4096 (the kernel stores 8192) and clears SO_BUF_LOCK,
then waits up to SECONDS (default 2) for SO_RCVBUF to be >= FLOOR again.
Prints one line, "cut to N, back to M after S s" or "cut to N, still M
after S s"; exit 0 when restored, 1 when not, 2 when the fd cannot be had.
"""
import ctypes
import socket
import sys
import time

SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438
SO_BUF_LOCK = 72
CUT = 4096


def main():
    pid, fd, floor = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    limit = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        print("pidfd_open(%d): errno %d" % (pid, ctypes.get_errno()))
        return 2
    dup = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
    if dup < 0:
        print("pidfd_getfd(%d, %d): errno %d" % (pid, fd, ctypes.get_errno()))
        return 2
    s = socket.socket(fileno=dup)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CUT)
    s.setsockopt(socket.SOL_SOCKET, SO_BUF_LOCK, 0)
    t0 = time.monotonic()
    got = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    now = got
    while time.monotonic() - t0 < limit:
        now = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        if now >= floor:
            break
        time.sleep(0.002)
    took = time.monotonic() - t0
    back = now >= floor
    print("cut to %d, %s %d after %.3f s" % (got, "back to" if back else "still", now, took))
    s.close()  # our duplicate only: the process keeps its socket
    return 0 if back else 1


if __name__ == "__main__":
    sys.exit(main())

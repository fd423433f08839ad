#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Proof on programs nobody here wrote: iperf3 (-w 128K) and a Python
listener that sets SO_RCVBUF, each run plain and under
`sockbuf run --policy initial`, between two network namespaces joined by a
veth pair (198.18.20.0/24).  Assertions come from the kernel's side:
`sockbuf show --json` (inet_diag + pidfd_getfd + SO_BUF_LOCK) and, for the
Python listener, an independent pidfd_getfd + getsockopt from here.

Plain runs must lock (the kernel's behaviour); shimmed runs must stay
unlocked and grow; every program must exit 0 both ways.

Throughput at a real RTT (50 ms netem) needs a qemu guest and is not
measured here.

usage: real_programs.py --sockbuf PATH/TO/sockbuf
Exit: 0 pass, 1 fail, 77 skip (not root, no ip/iperf3, no netns).
"""
import argparse
import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
import time

SKIP = 77
SRV_ADDR, CLI_ADDR = "198.18.20.1", "198.18.20.2"
SO_BUF_LOCK = 72
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438
PY_BYTES = 64 << 20
IPERF_PORT, PY_PORT = 5201, 5202
IPERF_SECONDS = 3

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def skip(why):
    """Says why the checks cannot run here: the exit status of a skip."""
    print(f"SKIP: {why}")
    return SKIP


def root_missing():
    """Why checks in network namespaces cannot run here, or None."""
    return None if os.geteuid() == 0 else "needs root for network namespaces"


def root_args(*options):
    """The command line of a check that runs in network namespaces:
    --sockbuf PATH and each of @options (a required --NAME VALUE; a
    (NAME, DEFAULT) pair for an optional one).  None once it has said why
    it cannot run here: the caller then returns SKIP."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--sockbuf", required=True)
    for o in options:
        if isinstance(o, tuple):
            ap.add_argument(o[0], default=o[1])
        else:
            ap.add_argument(o, required=True)
    args = ap.parse_args()
    why = root_missing()
    if why:
        skip(why)
        return None
    return args


def seccomp_missing(sockbuf):
    """Why `sockbuf run --via seccomp` cannot run here, or None."""
    probe = subprocess.run([sockbuf, "run", "--via", "seccomp", "--", "true"],
                           capture_output=True, text=True)
    if probe.returncode == 125:
        return f"no seccomp supervisor here: {probe.stderr.strip()}"
    return None


def ways(sockbuf, what):
    """The ways to run a program: plain, the preload shim, and the seccomp
    supervisor where this kernel has it (else a skip line saying why)."""
    out = ["plain", "preload"]
    missing = seccomp_missing(sockbuf)
    if missing:
        print(f"skip: {what}, seccomp: {missing}")
    else:
        out.append("seccomp")
    return out


def stop(proc, ask=None, timeout=10):
    """Ends @proc if it still runs, bounded: @ask(proc) first (a line on
    its stdin, SIGTERM), then up to @timeout s for it to exit, then
    SIGKILL."""
    if proc.poll() is not None:
        return
    if ask:
        try:
            ask(proc)
        except OSError:
            pass  # a pipe it already closed: the wait says the rest
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def in_namespaces(body):
    """body(ns) in a fresh pair of namespaces, its result; namespaces that
    cannot be made are a skip with the reason, never a pass."""
    try:
        with Namespaces() as ns:
            return body(ns)
    except subprocess.CalledProcessError as e:
        if "netns" in " ".join(map(str, e.cmd)):
            return skip(f"cannot create network namespaces: {e.stderr}")
        raise


def verdict():
    """The exit status of the checks made so far, said in one line."""
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


def run(*args, check_rc=True, timeout=20):
    return subprocess.run(args, check=check_rc, capture_output=True, text=True,
                          timeout=timeout)


def send_zeros(ns, port, nbytes):
    """@nbytes zero bytes sent from namespace @ns.cli to SRV_ADDR:@port on
    one connection: the sender's run (its exit status not checked)."""
    return run("ip", "netns", "exec", ns.cli, sys.executable, "-c",
               "import socket,sys; s=socket.create_connection((sys.argv[1], "
               "int(sys.argv[2]))); s.sendall(bytes(int(sys.argv[3]))); s.close()",
               SRV_ADDR, str(port), str(nbytes), check_rc=False, timeout=30)


class Namespaces:
    """Two network namespaces and a veth pair; removed on exit."""

    def __init__(self):
        tag = os.getpid()
        self.srv, self.cli = f"sbs-{tag}-s", f"sbs-{tag}-c"
        self.veth_s, self.veth_c = f"sbs{tag}s", f"sbs{tag}c"

    def __enter__(self):
        try:
            run("ip", "netns", "add", self.srv)
            run("ip", "netns", "add", self.cli)
            run("ip", "link", "add", self.veth_s, "netns", self.srv, "type", "veth",
                "peer", "name", self.veth_c, "netns", self.cli)
            for ns, dev, addr in ((self.srv, self.veth_s, SRV_ADDR),
                                  (self.cli, self.veth_c, CLI_ADDR)):
                run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                run("ip", "-n", ns, "link", "set", dev, "up")
                run("ip", "-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for ns in (self.srv, self.cli):
            run("ip", "netns", "del", ns, check_rc=False)

    def flush_metrics(self):
        for ns in (self.srv, self.cli):
            run("ip", "-n", ns, "tcp_metrics", "flush", check_rc=False)

    def cmd(self, ns, argv, shim, sockbuf):
        prefix = [sockbuf, "run", "-q", "--policy", "initial", "--"] if shim else []
        return ["ip", "netns", "exec", ns] + prefix + argv


def show(sockbuf, pid):
    """`sockbuf show --json PID`, or None when the process is gone (exit 3
    says a socket is below its floor: still a listing)."""
    r = run(sockbuf, "show", "--json", str(pid), check_rc=False)
    if r.returncode not in (0, 3):
        return None
    return json.loads(r.stdout)


libc = ctypes.CDLL(None, use_errno=True)


def dup_of(pid, fd):
    """A duplicate of fd @fd of @pid (a socket object, through
    pidfd_getfd), or None."""
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        return None
    try:
        dup = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        return socket.socket(fileno=dup) if dup >= 0 else None
    finally:
        os.close(pidfd)


def rcvbuf(s):
    return s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def say_done(p):
    """Tells a program that ends on a line on its stdin (py_listener.py) to end."""
    p.stdin.write("\n")
    p.stdin.flush()


def lock_bits(pid, fd):
    """SO_BUF_LOCK and SO_RCVBUF of another process's socket."""
    s = dup_of(pid, fd)
    if s is None:
        return None
    try:
        return s.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK), rcvbuf(s)
    finally:
        s.close()  # our duplicate only


def wait_listening(sockbuf, pid, port, proc, deadline):
    while time.monotonic() < deadline and proc.poll() is None:
        j = show(sockbuf, pid)
        if j and any(s["state"] == "LISTEN" and s["local"].endswith(f":{port}")
                     for s in j["sockets"]):
            return True
        time.sleep(0.02)
    return False


def python_listener(ns, sockbuf, shim):
    label = "python listener " + ("shimmed" if shim else "plain")
    ns.flush_metrics()
    here = os.path.dirname(os.path.abspath(__file__))
    listener = subprocess.Popen(
        ns.cmd(ns.srv, [sys.executable, os.path.join(here, "py_listener.py"), SRV_ADDR,
                        str(PY_PORT), str(PY_BYTES)], shim, sockbuf),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = listener.stdout.readline().strip()
        check(first == "listening readback=131072",
              f"{label}: SO_RCVBUF 64K reads back 131072 ({first!r})")
        sender = send_zeros(ns, PY_PORT, PY_BYTES)
        check(sender.returncode == 0, f"{label}: sender exit {sender.returncode}")
        line = listener.stdout.readline().strip()
        check(line.startswith(f"received {PY_BYTES} fd="), f"{label}: {line!r}")
        fd = int(line.split("fd=")[1]) if "fd=" in line else -1
        # The listener is parked on stdin: its accepted socket is still open.
        direct = lock_bits(listener.pid, fd)
        j = show(sockbuf, listener.pid)
        entry = next((s for s in (j or {}).get("sockets", []) if s["fd"] == fd), None)
        check(direct is not None and entry is not None,
              f"{label}: accepted socket fd {fd} seen (pidfd {direct}, show {bool(entry)})")
        if direct is not None and entry is not None:
            lock, rcvbuf = direct
            check(entry["lock_bits"] == lock and entry["rcvbuf"] == rcvbuf,
                  f"{label}: sockbuf show agrees with pidfd_getfd "
                  f"(lock {entry['lock_bits']}/{lock}, rcvbuf {entry['rcvbuf']}/{rcvbuf})")
            if shim:
                check(lock == 0, f"{label}: accepted socket unlocked (lock {lock})")
                check(rcvbuf > 131072,
                      f"{label}: receive buffer grew past 131072 (now {rcvbuf})")
            else:
                check(lock & 2 == 2, f"{label}: accepted socket locked (lock {lock})")
                check(rcvbuf == 131072, f"{label}: receive buffer stuck at 131072 ({rcvbuf})")
                check(entry["problem"] and entry["diagnosis"][0].startswith(
                    "receive buffer locked at 128 KB"),
                    f"{label}: diagnosis {entry['diagnosis'][:1]}")
        listener.stdin.write("\n")
        listener.stdin.flush()
        rc = listener.wait(timeout=10)
        check(rc == 0, f"{label}: listener exit {rc}")
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()


def data_socket(j, port, server):
    """The iperf3 data connection: the one that moved the most bytes."""
    best = None
    for s in (j or {}).get("sockets", []):
        end = s["local"] if server else s["remote"]
        if s["state"] != "ESTABLISHED" or not end.endswith(f":{port}"):
            continue
        info = s.get("tcp_info", {})
        moved = info.get("bytes_received", 0) if server else info.get("bytes_acked", 0)
        if best is None or moved > best[0]:
            best = (moved, s)
    return best[1] if best and best[0] > (1 << 20) else None


def iperf3(ns, sockbuf, shim):
    label = "iperf3 " + ("shimmed" if shim else "plain")
    ns.flush_metrics()
    server = subprocess.Popen(
        ns.cmd(ns.srv, ["iperf3", "-s", "-1", "-B", SRV_ADDR, "-p", str(IPERF_PORT), "-J"],
               shim, sockbuf),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = None
    try:
        ready = wait_listening(sockbuf, server.pid, IPERF_PORT, server,
                               time.monotonic() + 10)
        check(ready, f"{label}: server listening")
        if not ready:
            return
        client = subprocess.Popen(
            ns.cmd(ns.cli, ["iperf3", "-c", SRV_ADDR, "-p", str(IPERF_PORT), "-w", "128K",
                            "-t", str(IPERF_SECONDS), "-J"], shim, sockbuf),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        srv_samples, cli_samples = [], []
        deadline = time.monotonic() + IPERF_SECONDS + 10
        while client.poll() is None and time.monotonic() < deadline:
            # A lock of -1 means pidfd_getfd lost a race with the
            # connection closing: that sample tells nothing.
            s = data_socket(show(sockbuf, server.pid), IPERF_PORT, True)
            if s and s["lock_bits"] >= 0:
                srv_samples.append((s["lock_bits"], s["rcvbuf"]))
            c = data_socket(show(sockbuf, client.pid), IPERF_PORT, False)
            if c and c["lock_bits"] >= 0:
                cli_samples.append((c["lock_bits"], c["sndbuf"]))
            time.sleep(0.1)
        out, _ = client.communicate(timeout=15)
        check(client.returncode == 0, f"{label}: client exit {client.returncode}")
        srv_out, _ = server.communicate(timeout=15)
        check(server.returncode == 0, f"{label}: server exit {server.returncode}")
        try:
            start = json.loads(out)["start"]
            check(start.get("sndbuf_actual", 0) >= 262144 and
                  start.get("rcvbuf_actual", 0) >= 262144,
                  f"{label}: iperf3's read-back check passes (sndbuf_actual "
                  f"{start.get('sndbuf_actual')}, rcvbuf_actual {start.get('rcvbuf_actual')})")
        except (ValueError, KeyError) as e:
            check(False, f"{label}: client JSON unreadable ({e}): {out[-300:]}")
        check(len(srv_samples) >= 3 and len(cli_samples) >= 3,
              f"{label}: sampled the data connection ({len(srv_samples)} server, "
              f"{len(cli_samples)} client samples)")
        if not srv_samples or not cli_samples:
            return
        srv_locks = {lock for lock, _ in srv_samples}
        cli_locks = {lock for lock, _ in cli_samples}
        max_rcv = max(r for _, r in srv_samples)
        max_snd = max(s for _, s in cli_samples)
        if shim:
            check(srv_locks == {0}, f"{label}: server data socket unlocked ({srv_locks})")
            check(cli_locks == {0}, f"{label}: client data socket unlocked ({cli_locks})")
            check(max_rcv > 262144, f"{label}: server receive buffer grew to {max_rcv}")
            check(min(r for _, r in srv_samples) >= 262144,
                  f"{label}: never below the 262144 it asked for")
        else:
            check(all(lock & 2 for lock in srv_locks),
                  f"{label}: server data socket receive-locked ({srv_locks})")
            check(all(lock & 1 for lock in cli_locks),
                  f"{label}: client data socket send-locked ({cli_locks})")
            check(max_rcv == 262144, f"{label}: server receive buffer stuck at {max_rcv}")
            check(max_snd == 262144, f"{label}: client send buffer stuck at {max_snd}")
    finally:
        for p in (client, server):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def main():
    args = root_args()
    if args is None:
        return SKIP
    for tool in ("ip", "iperf3"):
        if not shutil.which(tool):
            return skip(f"{tool} not installed")

    def both(ns):
        for shim in (False, True):
            python_listener(ns, args.sockbuf, shim)
            iperf3(ns, args.sockbuf, shim)

    return in_namespaces(both) or verdict()


if __name__ == "__main__":
    sys.exit(main())

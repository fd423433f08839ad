#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nginx (Debian's) with `listen ... rcvbuf=128k sndbuf=128k` and three
worker processes, plain and under `sockbuf run --policy initial`, in a
network namespace.  The master sets the sizes on the listener before it
forks the workers; every worker holds the same listener.  Plain: the
listener is locked in both directions in the master and in each worker,
and no floor is published.  Under the shim: unlocked everywhere, and each
worker's `sockbuf show` lists the floor the master set (the shim's fork
handler seeds the child's floor table), not "0 with a floor".  A 16 MB
file is fetched from the client namespace and checksummed, over a
keep-alive connection that then stays open: under the shim and under the
seccomp supervisor (`--via seccomp`, which finds the worker's accepted
socket by its listener's port) the worker's connection shows the
listener's floor "from its listener"; plain, none.

usage: nginx_workers.py --sockbuf PATH --work-dir DIR
Exit: 0 pass, 1 fail, 77 skip (not root, no nginx, no netns).
"""
import os
import shutil
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_programs as rp  # noqa: E402

PORT = 5501
WORKERS = 3
SIZE = 16 << 20

CONF = """worker_processes {workers};
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log stderr notice;
events {{ worker_connections 64; }}
http {{
    access_log off;
    server {{
        listen {addr}:{port} rcvbuf=128k sndbuf=128k;
        root {prefix}/html;
    }}
}}
"""

# One GET over a keep-alive connection, the body checksummed; the
# connection stays open until a line arrives on stdin or it ends.
FETCH = """
import socket, sys, zlib
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
s.sendall(b"GET /blob HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
buf = b""
while b"\\r\\n\\r\\n" not in buf:
    buf += s.recv(65536)
head, body = buf.split(b"\\r\\n\\r\\n", 1)
length = int([l.split(b":")[1] for l in head.split(b"\\r\\n")
              if l.lower().startswith(b"content-length:")][0])
while len(body) < length:
    chunk = s.recv(1 << 20)
    if not chunk:
        break
    body += chunk
print(len(body), "%08x" % zlib.crc32(body), s.getsockname()[1], flush=True)
sys.stdin.readline()
s.close()
"""


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def listener(sockbuf, pid):
    j = rp.show(sockbuf, pid)
    return next((s for s in (j or {}).get("sockets", [])
                 if s["state"] == "LISTEN" and s["local"].endswith(f":{PORT}")), None)


def connection(sockbuf, pid, client_port):
    j = rp.show(sockbuf, pid)
    return next((s for s in (j or {}).get("sockets", [])
                 if s["state"] == "ESTABLISHED" and s["remote"].endswith(f":{client_port}")),
                None)


def one_run(args, ns, nginx, prefix, via, crc):
    shim = via != "plain"
    label = "nginx " + {"plain": "plain", "preload": "under the shim",
                        "seccomp": "under the supervisor"}[via]
    argv = [nginx, "-p", prefix, "-c", os.path.join(prefix, "nginx.conf")]
    if shim:
        argv = [args.sockbuf, "run", "-q", "--via", via, "--policy", "initial", "--"] + argv
    top = subprocess.Popen(["ip", "netns", "exec", ns.srv] + argv,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    master = top
    fetch = None
    try:
        deadline = time.monotonic() + 15
        workers = []
        if via == "seccomp":  # the supervisor's child is nginx's master
            while time.monotonic() < deadline and not children(top.pid):
                time.sleep(0.05)
            master = type("master", (), {"pid": (children(top.pid) or [top.pid])[0],
                                         "poll": top.poll})
        while time.monotonic() < deadline and top.poll() is None:
            workers = children(master.pid)
            if len(workers) == WORKERS and all(listener(args.sockbuf, w) for w in workers):
                break
            time.sleep(0.05)
        rp.check(len(workers) == WORKERS, f"{label}: {len(workers)} workers of {WORKERS}")
        fetch = subprocess.Popen(["ip", "netns", "exec", ns.cli, sys.executable, "-c", FETCH,
                                  rp.SRV_ADDR, str(PORT)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        got = fetch.stdout.readline().split()
        rp.check(got[:2] == [str(SIZE), f"{crc:08x}"],
                 f"{label}: 16 MB fetched, checksum intact ({got!r})")
        # The worker that accepted it: its connection's floor is the
        # listener's (the supervisor finds it within a pass, 1 s).
        client_port = got[2] if len(got) == 3 else "?"
        conn, end = None, time.monotonic() + 5
        while time.monotonic() < end:
            found = [c for c in (connection(args.sockbuf, w, client_port) for w in workers) if c]
            conn = found[0] if found else None
            if conn is None or not shim or "floor" in conn:
                break
            time.sleep(0.05)
        rp.check(conn is not None, f"{label}: a worker holds the connection")
        if conn is not None:
            floor = conn.get("floor", {})
            if shim:
                rp.check(floor.get("snd") == 262144 and floor.get("rcv") == 262144 and
                         "from its listener" in floor.get("by", ""),
                         f"{label}: the connection has its listener's floor ({floor})")
            else:
                rp.check(not floor, f"{label}: the connection has no floor ({floor})")
        for who, pid in [("master", master.pid)] + [(f"worker {w}", w) for w in workers]:
            s = listener(args.sockbuf, pid)
            rp.check(s is not None, f"{label}: {who} holds the listener")
            if s is None:
                continue
            floor = s.get("floor", {})
            if shim:
                rp.check(s["lock_bits"] == 0, f"{label}: {who}: listener unlocked "
                         f"({s['lock_bits']})")
                rp.check(floor.get("snd") == 262144 and floor.get("rcv") == 262144,
                         f"{label}: {who}: floor snd/rcv 262144 shown ({floor})")
            else:
                rp.check(s["lock_bits"] == 3, f"{label}: {who}: listener locked "
                         f"({s['lock_bits']})")
                rp.check(not floor, f"{label}: {who}: no floor ({floor})")
    finally:
        if fetch is not None:
            rp.stop(fetch, ask=lambda p: p.stdin.close())  # FETCH ends at its stdin's end
        rp.stop(top, ask=subprocess.Popen.terminate)


def main():
    args = rp.root_args("--work-dir")
    if args is None:
        return rp.SKIP
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                      else None)
    if not nginx:
        return rp.skip("nginx not installed (Debian package nginx-light)")
    prefix = os.path.abspath(args.work_dir)
    shutil.rmtree(prefix, ignore_errors=True)
    os.makedirs(os.path.join(prefix, "html"))
    os.makedirs(os.path.join(prefix, "logs"))
    blob = bytes(range(256)) * (SIZE // 256)
    with open(os.path.join(prefix, "html", "blob"), "wb") as f:
        f.write(blob)
    os.chmod(prefix, 0o755)
    with open(os.path.join(prefix, "nginx.conf"), "w") as f:
        f.write(CONF.format(workers=WORKERS, prefix=prefix, addr=rp.SRV_ADDR, port=PORT))
    crc = zlib.crc32(blob)

    modes = rp.ways(args.sockbuf, "nginx")

    def both(ns):
        for via in modes:
            one_run(args, ns, nginx, prefix, via, crc)

    return rp.in_namespaces(both) or rp.verdict()


if __name__ == "__main__":
    sys.exit(main())

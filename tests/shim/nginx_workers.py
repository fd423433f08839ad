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
file is fetched from the client namespace and checksummed both ways.

usage: nginx_workers.py --sockbuf PATH --work-dir DIR
Exit: 0 pass, 1 fail, 77 skip (not root, no nginx, no netns).
"""
import argparse
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

FETCH = ("import sys, urllib.request, zlib;"
         " b = urllib.request.urlopen(sys.argv[1], timeout=20).read();"
         " print(len(b), '%08x' % zlib.crc32(b))")


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


def one_run(args, ns, nginx, prefix, shim, crc):
    label = "nginx " + ("under the shim" if shim else "plain")
    argv = [nginx, "-p", prefix, "-c", os.path.join(prefix, "nginx.conf")]
    if shim:
        argv = [args.sockbuf, "run", "-q", "--policy", "initial", "--"] + argv
    master = subprocess.Popen(["ip", "netns", "exec", ns.srv] + argv,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        workers = []
        while time.monotonic() < deadline and master.poll() is None:
            workers = children(master.pid)
            if len(workers) == WORKERS and all(listener(args.sockbuf, w) for w in workers):
                break
            time.sleep(0.05)
        rp.check(len(workers) == WORKERS, f"{label}: {len(workers)} workers of {WORKERS}")
        got = rp.run("ip", "netns", "exec", ns.cli, sys.executable, "-c", FETCH,
                     f"http://{rp.SRV_ADDR}:{PORT}/blob", check_rc=False, timeout=60)
        rp.check(got.stdout.split() == [str(SIZE), f"{crc:08x}"],
                 f"{label}: 16 MB fetched, checksum intact ({got.stdout.strip()!r} "
                 f"{got.stderr.strip()[-200:]!r})")
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
        master.terminate()
        try:
            master.wait(timeout=10)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sockbuf", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    why = rp.root_missing()
    if why:
        return rp.skip(why)
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

    def both(ns):
        one_run(args, ns, nginx, prefix, False, crc)
        one_run(args, ns, nginx, prefix, True, crc)

    return rp.in_namespaces(both) or rp.verdict()


if __name__ == "__main__":
    sys.exit(main())

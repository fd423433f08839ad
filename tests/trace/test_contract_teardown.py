#!/usr/bin/env python3
"""sockbuf-contract --trace on leaves nothing in tracefs: no instance, no
kprobe event of its pid, after a normal run and after SIGTERM mid-run.

Runs in a mount namespace of its own (ctest starts it under
`unshare -m --propagation private`) where it mounts tracefs if needed;
tracefs is one per kernel, so it sees what the tool left.
usage: test_contract_teardown.py SOCKBUF_CONTRACT   (exit 77: skip)"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


def tracefs():
    for p in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(os.path.join(p, "instances")):
            return p
    if subprocess.call(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                       stderr=subprocess.DEVNULL) == 0:
        return "/sys/kernel/tracing"
    return None


def leftovers(tfs, pid):
    left = []
    inst = os.path.join(tfs, "instances", "sockbuf-%d" % pid)
    if os.path.exists(inst):
        left.append(inst)
    kp = os.path.join(tfs, "kprobe_events")
    if os.path.exists(kp):
        left += [l for l in open(kp).read().splitlines() if "sockbuf_%d_" % pid in l]
    return left


def main():
    tool = sys.argv[1]
    if os.geteuid() != 0:
        print("SKIP: not root: tracefs instances need root")
        return SKIP
    tfs = tracefs()
    if not tfs:
        print("SKIP: no tracefs on this kernel")
        return SKIP
    args = [tool, "--quick", "--scenario", "bulk", "--clause", "C3", "--trace", "on"]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "run.json")
        p = subprocess.Popen(args + ["--format", "json:" + out], stdout=subprocess.DEVNULL)
        rc = p.wait(timeout=120)
        if rc not in (0, 1):
            print("FAIL: sockbuf-contract exited %d" % rc)
            return 1
        t = json.load(open(out))["trace"]
        if not t["active"]:
            print("SKIP: recorder inactive: %s" % t.get("reason"))
            return SKIP
        left = leftovers(tfs, p.pid)
        print("normal run: enabled %s; left: %s" % (t["enabled"], left or "nothing"))
        if left:
            return 1

    # SIGTERM right after the instance exists (while the recorder may still
    # be setting up), then between two scenarios (while it reads the trace).
    for when in ("at start", "after the first scenario"):
        two = [a if a != "bulk" else "bulk,slow_reader" for a in args]
        p = subprocess.Popen(two, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        inst = os.path.join(tfs, "instances", "sockbuf-%d" % p.pid)
        deadline = time.monotonic() + 30
        if when == "at start":
            # Bounded wait for the instance to exist.
            while not os.path.exists(inst) and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            ready = os.path.exists(inst)
        else:
            line = p.stderr.readline()  # the first scenario's progress line
            ready = line.startswith("[1/2]") and os.path.exists(inst)
        if not ready:
            p.kill()
            p.wait()
            print("FAIL: %s: the recorder's instance %s was not there" % (when, inst))
            return 1
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
        p.stderr.close()
        left = leftovers(tfs, p.pid)
        print("SIGTERM %s: exit %d; left: %s" % (when, rc, left or "nothing"))
        if rc != -signal.SIGTERM or left:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

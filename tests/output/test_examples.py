#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every `sockbuf` command line shown as an example runs as written: the
"$ " lines of the man pages' EXAMPLE blocks (docs/man/*.1, *.8) and the
lines starting with "sockbuf COMMAND " in README.md's and shim/README.md's code
blocks.  Each runs through bash with the built `sockbuf` first in PATH
and must exit 0.  What stands for the reader's own things is supplied:
"1234" and "$(pidof mydaemon)" are two running servers named mydaemon
with a locked listener; 198.18.20.1 is an iperf3 server in a network
namespace of the test's own, the example running in its peer with "-t 1"
added (one second of traffic, not ten).  Lines
that cannot run here are skipped with the reason ("./server" is the
reader's program; "..." elides an address; no jq; not root).

usage: test_examples.py SOCKBUF SOURCE_DIR
Exit: 0 pass, 1 fail (skips are said, never passed silently).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shim"))
import real_programs as rp  # noqa: E402

SERVER = ("import select, socket, sys\n"
          "l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)\n"
          "l.bind(('127.0.0.1', 0)); l.listen(4)\n"
          "print('up', flush=True); select.select([sys.stdin], [], [])\n")

skipped = []


def man_examples(path):
    """The "$ " lines of .EX blocks, roff escapes undone."""
    out, inside = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(".EX"):
                inside = True
            elif line.startswith(".EE"):
                inside = False
            elif inside and line.startswith("$ "):
                out.append(line[2:].replace("\\-", "-").replace("\\e", "\\"))
    return out


def markdown_examples(path):
    out, inside = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                inside = not inside
            elif inside and re.match(r"sockbuf (probe|demo|run|show|fix)(\s|$)", line):
                out.append(line.rstrip("\n"))  # a command line, not its output
    return out


def why_not(cmd):
    """Why @cmd cannot run here, or None."""
    if re.search(r"\./(go-)?server", cmd):
        return "./server and ./go-server stand for the reader's program"
    if "..." in cmd:
        return "'...' elides what the reader puts there"
    if "| jq" in cmd and not shutil.which("jq"):
        return "no jq here"
    if "198.18.20.1" in cmd:
        if os.geteuid() != 0:
            return "needs root for the network namespaces of an iperf3 server"
        if not shutil.which("iperf3") or not shutil.which("ip"):
            return "no iperf3 or ip here"
    return None


def run_one(cmd, env, ns):
    if "198.18.20.1" in cmd:
        server = subprocess.Popen(["ip", "netns", "exec", ns.srv, "iperf3", "-s", "-1", "-B",
                                   rp.SRV_ADDR], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            # Up when its port listens (bounded: 500 looks, 10 s).
            for _ in range(500):
                ss = rp.run("ip", "netns", "exec", ns.srv, "ss", "-Hltn", "sport = :5201",
                            check_rc=False)
                if ss.stdout.strip() or server.poll() is not None:
                    break
                subprocess.run(["sleep", "0.02"])
            # Bounded: one second of traffic instead of iperf3's ten.
            return subprocess.run(["ip", "netns", "exec", ns.cli, "bash", "-o", "pipefail",
                                   "-c", cmd + " -t 1"], capture_output=True, text=True,
                                  env=env, timeout=60)
        finally:
            rp.stop(server, lambda p: p.terminate())
    # --all in a network namespace of the test's own, where no other
    # program's socket can be below its floor (exit 3).
    inside = ["ip", "netns", "exec", ns.cli] if ns and "--all" in cmd else []
    return subprocess.run(inside + ["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          text=True, env=env, timeout=120)


def main():
    sockbuf, src = sys.argv[1:3]
    examples = []
    for page in sorted(glob.glob(os.path.join(src, "docs", "man", "*.[18]"))):
        examples += [(os.path.relpath(page, src), c) for c in man_examples(page)]
    for md in ("README.md", os.path.join("shim", "README.md")):
        examples += [(md, c) for c in markdown_examples(os.path.join(src, md))]
    if not examples:
        rp.check(False, "no examples found")
        return rp.verdict()
    with tempfile.TemporaryDirectory(prefix="sbex-") as tmp:
        os.symlink(os.path.abspath(sockbuf), os.path.join(tmp, "sockbuf"))
        os.symlink(sys.executable, os.path.join(tmp, "mydaemon"))
        env = dict(os.environ, PATH=tmp + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
        daemons = [subprocess.Popen([os.path.join(tmp, "mydaemon"), "-c", SERVER],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                   for _ in range(2)]
        ns = None
        try:
            for d in daemons:
                d.stdout.readline()
            if os.geteuid() == 0 and shutil.which("ip"):
                ns = rp.Namespaces().__enter__()
            for where, cmd in examples:
                why = why_not(cmd)
                if why is None and "198.18.20.1" in cmd and ns is None:
                    why = "no network namespaces here"
                if why:
                    print(f"skip: {where}: {cmd}: {why}")
                    skipped.append(cmd)
                    continue
                line = cmd.replace("1234", str(daemons[0].pid))
                r = run_one(line, env, ns)
                rp.check(r.returncode == 0,
                         f"{where}: {cmd} (exit {r.returncode}"
                         + (f": {(r.stderr or r.stdout).strip()[-300:]!r})" if r.returncode
                            else ")"))
        finally:
            if ns:
                ns.__exit__(None, None, None)
            for d in daemons:
                rp.stop(d, rp.say_done)
    print(f"{len(skipped)} example(s) skipped, each with its reason")
    return rp.verdict()


if __name__ == "__main__":
    sys.exit(main())

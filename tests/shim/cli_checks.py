#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What an operator types first, as typed: each check runs a command line
from sockbuf(1), its --help or shim/README.md and checks its output and
exit status.

- Errors name the problem in one line (exit 2), help exits 0: `probe
  --help`, `demo --help`, `show 0`, `show abc`, `show --all PID`, `show
  PID --json --watch 100`, `run --floor-guard 0`; the top-level --help
  lists --floor-guard, --guard, --watch and --check; `fix --floor 1G` is
  taken.
- Several PIDs: `show P1 P2` and `show --json P1 P2` list both, `fix
  --dry-run $(pidof mydaemon)` covers every process of that name.
- `fix PID --floor 64M` says what the kernel set (read back: twice
  net.core.wmem_max), names the clamp in --dry-run too, and `--guard`
  keeps the floor at that reach without a "restore" every second.
- `show --all --check` in a network namespace of its own: one line per
  locked socket and exit 3; after `fix`, nothing and exit 0.
- A socket passed by systemd-socket-activate (LISTEN_FDS) and locked is
  named with its socket unit, in `show` and `--check`.
- `show 1` as nobody says why it cannot list (ptrace rights), exit 1.
- `run -- python3 -c pass` does not claim python imports no setsockopt.
- `--watch` prints the first sample and changes only, then a summary.

usage: cli_checks.py --sockbuf PATH
Exit: 0 pass, 1 fail, 77 skip (not root).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_programs as rp  # noqa: E402

check = rp.check

# A server that locks its listener's buffers (SO_SNDBUF/SO_RCVBUF as asked)
# and, with a count, opens that many more listeners; prints its PID, port
# and fds, and ends on a line on stdin (or EOF), or after LIFE seconds.
SERVER = r'''
import os, select, socket, sys
snd, rcv, n, life = (int(a) for a in sys.argv[1:5])
fds = []
socks = []
start = 3 if os.environ.get("LISTEN_FDS") else 0
if start:
    l = socket.socket(fileno=3)
    socks.append(l)
for _ in range(n):
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(4)
    socks.append(l)
for l in socks:
    if snd:
        l.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, snd)
    if rcv:
        l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcv)
print(os.getpid(), socks[0].getsockname()[1], *[l.fileno() for l in socks], flush=True)
select.select([sys.stdin], [], [], life)
'''


def tool(sockbuf, *args, timeout=30, env=None, user=None):
    argv = [sockbuf, *args]
    if user:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + argv
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


class Server:
    """One SERVER process (its PID, port and listener fds)."""

    def __init__(self, snd=0, rcv=0, n=1, life=60, prefix=(), exe=sys.executable,
                 knock=0):
        self.p = subprocess.Popen(list(prefix) + [exe, "-c", SERVER, str(snd), str(rcv),
                                                  str(n), str(life)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  stderr=subprocess.DEVNULL if knock else None)
        self.knocked = None
        if knock:
            # systemd-socket-activate starts the program at the first
            # connection to its socket.
            deadline = time.monotonic() + 10
            while self.knocked is None and time.monotonic() < deadline:
                try:
                    self.knocked = socket.create_connection(("127.0.0.1", knock), timeout=5)
                except OSError:
                    time.sleep(0.02)
        words = self.p.stdout.readline().split()
        self.pid = int(words[0]) if words else -1
        self.port = int(words[1]) if len(words) > 1 else -1
        self.fds = [int(w) for w in words[2:]]

    def stop(self):
        rp.stop(self.p, rp.say_done)
        if self.knocked:
            self.knocked.close()


def one_line_error(r, rc, *needles):
    lines = r.stderr.strip().splitlines()
    return (r.returncode == rc and len(lines) == 1 and not r.stdout and
            all(n in lines[0] for n in needles))


def help_and_errors(sockbuf):
    for cmd in ("probe", "demo"):
        r = tool(sockbuf, cmd, "--help")
        check(r.returncode == 0 and r.stdout.startswith(f"usage: sockbuf {cmd}"),
              f"sockbuf {cmd} --help: exit {r.returncode}, {r.stdout[:40]!r}")
    s = Server()
    try:
        pid = str(s.pid)
        for args, needles in ((["0"], ["0"]), (["abc"], ["'abc'"]),
                              (["--all", pid], ["--all", pid]),
                              ([pid, "--json", "--watch", "100"], ["--watch", "--json"]),
                              ([pid, "--json", "--watch"], ["--watch"])):
            r = tool(sockbuf, "show", *args)
            check(one_line_error(r, 2, *needles),
                  f"sockbuf show {' '.join(args)}: one line naming it, exit 2 "
                  f"(exit {r.returncode}, {r.stderr.strip()[:200]!r})")
        r = tool(sockbuf, "fix", pid, "--floor", "1G", "--dry-run")
        check(r.returncode == 0 and "would change" in r.stdout,
              f"sockbuf fix PID --floor 1G --dry-run taken (exit {r.returncode}, "
              f"{(r.stdout + r.stderr).strip()[:200]!r})")
        r = tool(sockbuf, "show", pid)
        check(r.returncode == 0 and "\n1 socket, 0 with a floor" in r.stdout,
              f"sockbuf show PID: '1 socket' ({r.stdout.strip().splitlines()[-1:]})")
        r = tool(sockbuf, "show", pid, "--watch", "10", "--count", "5")
        heads = [line for line in r.stdout.splitlines() if line.startswith("[+")]
        check(r.returncode == 0 and len(heads) == 1 and
              "watch ended (count reached): 5 samples" in r.stdout,
              f"show --watch 10 --count 5, nothing changing: the first sample and a "
              f"summary ({len(heads)} sample lines, exit {r.returncode}): {r.stdout[-300:]!r}")
        r = tool(sockbuf, "show", pid, "--watch", "10", "--count", "1", "--trace", "auto")
        events = next((x for x in r.stdout.splitlines() if x.startswith("kernel events:")), "")
        check(re.search(r"\(\d+ unavailable\)", events) is None and
              all(re.match(r" unavailable: \S+.*: .+", part)
                  for part in events.split(";")[1:]),
              f"the kernel events line names each unavailable one, with why: {events!r}")
    finally:
        s.stop()
    r = tool(sockbuf, "run", "--floor-guard", "0", "--", "true")
    check(r.returncode == 2 and "--floor-guard '0'" in r.stderr and "item" not in r.stderr,
          f"sockbuf run --floor-guard 0 names the flag: {r.stderr.strip()[:200]!r}")
    r = tool(sockbuf, "--help")
    check(r.returncode == 0 and all(w in r.stdout for w in
                                    ("--floor-guard", "--guard", "--watch", "--check")),
          "sockbuf --help lists --floor-guard, --guard, --watch and --check")


def several_pids(sockbuf, tmp):
    a, b = Server(snd=65536), Server(snd=65536)
    try:
        r = tool(sockbuf, "show", "--json", str(a.pid), str(b.pid))
        pids = set()
        if r.returncode == 0:
            pids = {s["pid"] for s in json.loads(r.stdout)["sockets"]}
        check(pids == {a.pid, b.pid},
              f"sockbuf show --json P1 P2 lists both ({pids}, exit {r.returncode})")
        r = tool(sockbuf, "show", str(a.pid), str(b.pid))
        check(r.returncode == 0 and f"pid {a.pid} fd" in r.stdout and
              f"pid {b.pid} fd" in r.stdout and "\n2 sockets," in r.stdout,
              f"sockbuf show P1 P2 lists both (exit {r.returncode})")
        r = tool(sockbuf, "show", str(a.pid), "4194000")
        check(r.returncode == 1 and f"pid {a.pid} fd" in r.stdout and
              "/proc/4194000/fd" in r.stderr,
              f"show P1 GONE: lists P1, names the other, exit 1 (exit {r.returncode})")
    finally:
        a.stop()
        b.stop()
    # The man page's example, with a name of this run's own (the examples
    # test runs it as written): every process of that name.
    name = f"sbcli{os.getpid()}"[:15]
    link = os.path.join(tmp, name)
    os.symlink(sys.executable, link)
    a, b = Server(snd=65536, exe=link), Server(snd=65536, exe=link)
    try:
        r = subprocess.run(["bash", "-c", f"{sockbuf} fix --dry-run $(pidof {name})"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and f"pid {a.pid}:" in r.stdout and
              f"pid {b.pid}:" in r.stdout and r.stdout.count("would change fd") == 2,
              f"sockbuf fix --dry-run $(pidof NAME): both (exit {r.returncode}, "
              f"{(r.stdout + r.stderr)[:300]!r})")
        r = subprocess.run(["bash", "-c", f"{sockbuf} show $(pidof {name})"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and f"pid {a.pid} fd" in r.stdout and
              f"pid {b.pid} fd" in r.stdout,
              f"sockbuf show $(pidof NAME) (shim/README.md): both (exit {r.returncode})")
    finally:
        a.stop()
        b.stop()


def stored_max(name):
    with open(f"/proc/sys/net/core/{name}") as f:
        return 2 * int(f.read())


def fix_reports_the_kernel(sockbuf):
    s = Server(snd=262144)
    want = stored_max("wmem_max")
    try:
        floor = 64 << 20
        if want >= floor:
            print(f"skip: fix clamp: net.core.wmem_max allows {want}, not below 64M")
            return
        pid = str(s.pid)
        r = tool(sockbuf, "fix", pid, "--floor", "64M", "--dry-run")
        line = next((x for x in r.stdout.splitlines() if x.startswith("would change")), "")
        check(r.returncode == 0 and f"snd 524288 locked -> {want} unlocked" in line and
              "net.core.wmem_max" in line and "CAP_NET_ADMIN" in line,
              f"fix --floor 64M --dry-run names the clamp: {line!r}")
        r = tool(sockbuf, "fix", pid, "--floor", "64M")
        line = next((x for x in r.stdout.splitlines() if x.startswith("changed")), "")
        check(r.returncode == 0 and f"snd 524288 locked -> {want} unlocked" in line and
              "[mem_max]" in line and "67108864 asked" in line,
              f"fix --floor 64M says what the kernel set: {line!r}")
        j = rp.show(sockbuf, s.pid)
        got = [x["sndbuf"] for x in (j or {}).get("sockets", [])]
        check(got == [want], f"the kernel's sndbuf is what fix said ({got}, {want})")
        g = subprocess.Popen([sockbuf, "fix", pid, "--floor", "64M", "--guard"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(2.5)  # the guard's passes every 10 ms: 2.5 s is ~250 passes
        g.send_signal(signal.SIGTERM)
        out, _ = g.communicate(timeout=10)
        check("restored" not in out.replace("0 restored", "") and
              out.count("kept at its reach") == 1 and
              re.search(r"0 below the floor, 0 restored", out) is not None,
              f"fix --guard keeps 64M at its reach, said once, no restores: {out!r}")
    finally:
        s.stop()


def host_check(sockbuf):
    ns = f"sbcli-{os.getpid()}"
    try:
        rp.run("ip", "netns", "add", ns)
    except subprocess.CalledProcessError as e:
        print(f"skip: show --all --check: cannot create a network namespace: {e.stderr}")
        return
    try:
        rp.run("ip", "-n", ns, "link", "set", "lo", "up")
        inside = ["ip", "netns", "exec", ns]
        r = subprocess.run(inside + [sockbuf, "show", "--all", "--check"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and r.stdout == "" and r.stderr == "",
              f"show --all --check, nothing there: quiet, exit 0 ({r.returncode}, "
              f"{r.stdout!r})")
        s = Server(rcv=65536, n=2, prefix=inside)
        try:
            r = subprocess.run(inside + [sockbuf, "show", "--all", "--check"],
                               capture_output=True, text=True, timeout=30)
            lines = r.stdout.splitlines()
            check(r.returncode == 3 and len(lines) == 2 and
                  all(f"pid {s.pid} fd" in x and "locked rcv" in x for x in lines),
                  f"show --all --check: a line per locked socket, exit 3 "
                  f"({r.returncode}, {r.stdout!r})")
            tool(sockbuf, "fix", str(s.pid))
            r = subprocess.run(inside + [sockbuf, "show", "--all", "--check"],
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 0 and r.stdout == "",
                  f"after fix: quiet, exit 0 ({r.returncode}, {r.stdout!r})")
        finally:
            s.stop()
    finally:
        rp.run("ip", "netns", "del", ns, check_rc=False)


def systemd_unit(sockbuf):
    activate = shutil.which("systemd-socket-activate")
    if not activate:
        print("skip: systemd socket unit: no systemd-socket-activate")
        return
    with socket.socket() as probe:  # a free port for the activator to listen on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    s = Server(rcv=65536, n=0, prefix=[activate, "-l", f"127.0.0.1:{port}",
                                       "--fdname=sbtest-web.socket"], knock=port)
    try:
        r = tool(sockbuf, "show", str(s.pid))
        check("passed by systemd from sbtest-web.socket" in r.stdout and
              "'sockbuf fix" in r.stdout,
              f"show names the socket unit of a locked passed socket: {r.stdout[-500:]!r}")
        r = tool(sockbuf, "show", str(s.pid), "--check")
        check(r.returncode == 3 and "(sbtest-web.socket)" in r.stdout,
              f"show PID --check names the unit ({r.returncode}, {r.stdout!r})")
        r = tool(sockbuf, "show", str(s.pid), "--json")
        j = json.loads(r.stdout) if r.stdout.startswith("{") else {}
        units = [x.get("systemd_unit") for x in j.get("sockets", [])]
        check(units == ["sbtest-web.socket"], f"show --json: systemd_unit {units}")
    finally:
        s.stop()


def as_nobody(sockbuf):
    r = tool(sockbuf, "show", "1", user="65534")
    check(r.returncode == 1 and "Permission denied" in r.stderr and
          "CAP_SYS_PTRACE" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          f"show 1 as nobody: why, in one line, exit 1 ({r.returncode}, {r.stderr!r})")


def python_claim(sockbuf):
    """A Python that loads its _socket module with dlopen (pyenv's, built
    shared) imports no setsockopt itself: run must not say it "imports no
    setsockopt (nor does any library it loads)".  Debian's python3.11 has
    the module built in and imports setsockopt: then there is nothing to
    check, and the line says so."""
    tried = 0
    for py in {shutil.which("python3.11"), shutil.which("python3"), sys.executable}:
        if not py:
            continue
        r = tool(sockbuf, "run", "--", py, "-c", "pass")
        if "imports setsockopt" in r.stderr and "dlopen" not in r.stderr:
            continue  # true of this one: its socket module is built in
        tried += 1
        check(r.returncode == 0 and
              "imports no setsockopt (nor does any library it loads)" not in r.stderr and
              "dlopen" in r.stderr,
              f"sockbuf run -- {py} says it loads modules with dlopen: {r.stderr.strip()!r}")
    if not tried:
        print("skip: run's dlopen wording: every python here imports setsockopt itself")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sockbuf", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0:
        return rp.skip("needs root (network namespaces, setpriv, another user's process)")
    with tempfile.TemporaryDirectory(prefix="sbcli-") as tmp:
        help_and_errors(args.sockbuf)
        several_pids(args.sockbuf, tmp)
        fix_reports_the_kernel(args.sockbuf)
        host_check(args.sockbuf)
        systemd_unit(args.sockbuf)
        as_nobody(args.sockbuf)
        python_claim(args.sockbuf)
    return rp.verdict()


if __name__ == "__main__":
    sys.exit(main())

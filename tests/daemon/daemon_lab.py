# SPDX-License-Identifier: MIT
"""What the sockbufd tests share: their command line, their skips (root,
user nobody), their run in a fresh pair of network namespaces, a server
run as nobody, a daemon run in a network namespace, bounded waits, and
its metrics file read back.  Imported by daemon_checks.py,
handover_checks.py and fault_checks.py; the namespaces, checks and skips
are real_programs.py's (tests/shim), imported here as rp.
"""
import argparse
import os
import pwd
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "shim"))
import real_programs as rp  # noqa: E402
from floor_table import start_time  # noqa: E402,F401

# The system's Python for servers run as nobody (a Python under /root
# would not be reachable by that user).
SERVER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# A command's prefix that runs it as user nobody, the way servers run.
AS_NOBODY = ("setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups")


def arguments():
    """The checks' command line: --sockbuf PATH --sockbufd PATH; a parser
    to add their own options to."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--sockbuf", required=True)
    ap.add_argument("--sockbufd", required=True)
    return ap


# Set in the copy of a test that runs in its own mount namespace.
ISOLATED = "SOCKBUF_TEST_ISOLATED"


def isolate():
    """Runs this script again in a mount namespace of its own, with a
    private tmpfs on /dev/shm and on the daemon's run directory
    (/run/sockbufd): what another test or a real sockbufd publishes there
    can neither fail these checks nor be disturbed by them.  Returns in
    that copy; as not root, returns at once (the checks skip)."""
    if os.environ.get(ISOLATED) == "1" or os.geteuid() != 0:
        return
    script = ("mount --make-rprivate / && "
              "mount -t tmpfs -o mode=1777,size=64m sockbuf-test /dev/shm && "
              "mkdir -p /run/sockbufd && "
              "mount -t tmpfs -o mode=755,size=1m sockbuf-test /run/sockbufd && "
              'exec "$@"')
    os.environ[ISOLATED] = "1"
    sys.stdout.flush()
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                          script, "sh", sys.executable, *sys.argv])


def run_checks(body, args, missing=None):
    """The checks' exit status: body(ns, args, tmp) in a fresh pair of
    network namespaces (rp.Namespaces) with a temporary directory, in a
    mount namespace of their own (isolate()), then the verdict; a skip
    instead where they cannot run here: not root, no user nobody, or
    @missing(), the checks' own reason (or None)."""
    isolate()
    why = rp.root_missing()
    if not why:
        try:
            pwd.getpwnam("nobody")
        except KeyError:
            why = "no user nobody"
    if not why and missing:
        why = missing()
    if why:
        return rp.skip(why)

    def run(ns):
        with tempfile.TemporaryDirectory() as tmp:
            body(ns, args, tmp)
        return rp.verdict()

    return rp.in_namespaces(run)


def nobody_listener(ns, sockbuf, port, nbytes, opts=(), env=None):
    """tests/shim/py_listener.py in @ns.srv as nobody, under `sockbuf run
    --policy initial` and @opts: it reads @nbytes on @port, one line a
    step on its standard output."""
    argv = [*AS_NOBODY, sockbuf, "run", "-q", "--via", "preload", "--policy", "initial", *opts,
            "--", SERVER_PYTHON, os.path.join(HERE, "..", "shim", "py_listener.py"),
            rp.SRV_ADDR, str(port), str(nbytes)]
    return subprocess.Popen(["ip", "netns", "exec", ns.srv] + argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)


def accepted(ns, srv, port, nbytes):
    """@nbytes sent from @ns.cli to @srv, a nobody_listener(): the fd of
    its accepted connection and that socket taken with pidfd_getfd, or
    None; each step checked."""
    first = srv.stdout.readline().strip()
    rp.check(first == "listening readback=131072", f"server as nobody: {first!r}")
    sender = rp.send_zeros(ns, port, nbytes)
    line = srv.stdout.readline().strip()
    rp.check(sender.returncode == 0 and " fd=" in line, f"transfer: {line!r}")
    if " fd=" not in line:
        return None
    fd = int(line.split("fd=")[1])
    s = rp.dup_of(srv.pid, fd)
    rp.check(s is not None, f"pidfd_getfd of the server's fd {fd}")
    return None if s is None else (fd, s)


def until(pred, seconds):
    """pred()'s first true value within @seconds, else its last value."""
    end = time.monotonic() + seconds
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.02)


def metric(path, name, **labels):
    """The sum of @name's samples in the metrics file @path whose labels
    include @labels, or None."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    return metric_in(text, name, **labels)


def metric_in(text, name, prefix="", **labels):
    """The same for metrics as text, each line after @prefix (a guest's
    console marks them "@@ ")."""
    total = None
    for line in text.splitlines():
        m = re.match(r"^%s%s(\{([^}]*)\})? (\S+)$" % (re.escape(prefix), re.escape(name)),
                     line.strip() if prefix else line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total = (total or 0) + float(m.group(3))
    return total


class Daemon:
    """sockbufd in network namespace @ns with @args, its standard error in
    @tmp/sockbufd.@n.log and its metrics in @tmp/@prom (written every
    second); @env its environment (None: this one's)."""

    def __init__(self, ns, sockbufd, tmp, n, args=("--interval", "10"), env=None,
                 prom="sockbufd.prom", nice=0):
        self.metrics = os.path.join(tmp, prom)
        self.log = open(os.path.join(tmp, f"sockbufd.{n}.log"), "w+")
        # `ip netns exec` and setpriv execute the daemon: its pid is the
        # daemon's, and it ends (SIGTERM) if the test is killed.
        # @nice: the unit's Nice=-10, where a check wants the daemon as
        # it runs there (nice execs the daemon: the pid stays its own).
        niced = ("nice", "-n", str(nice)) if nice else ()
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, "setpriv", "--pdeathsig", "TERM",
                                      *niced, sockbufd, *args, "--metrics-file", self.metrics],
                                     stdout=subprocess.DEVNULL, stderr=self.log, env=env)

    def text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def metric(self, name, **labels):
        return metric(self.metrics, name, **labels)

    def end(self, sig):
        """Sends @sig and waits (5 s, then SIGKILL); the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

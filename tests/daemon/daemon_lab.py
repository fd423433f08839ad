# SPDX-License-Identifier: MIT
"""What the sockbufd tests share: a daemon run in a network namespace,
bounded waits, and its metrics file read back.  Imported by
daemon_checks.py, handover_checks.py (through daemon_checks) and
fault_checks.py; the namespaces, checks and skips are real_programs.py's.
"""
import os
import re
import subprocess
import sys
import time

# The system's Python for servers run as nobody (a Python under /root
# would not be reachable by that user).
SERVER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def until(pred, seconds):
    """pred()'s first true value within @seconds, else its last value."""
    end = time.monotonic() + seconds
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.02)


def metric(path, name, **labels):
    """The sum of @name's samples whose labels include @labels, or None."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    total = None
    for line in text.splitlines():
        m = re.match(r"^%s(\{([^}]*)\})? (\S+)$" % re.escape(name), line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total = (total or 0) + float(m.group(3))
    return total


def start_time(pid):
    """Field 22 of /proc/PID/stat: the process's start in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


class Daemon:
    """sockbufd in network namespace @ns with @args, its standard error in
    @tmp/sockbufd.@n.log and its metrics in @tmp/@prom (written every
    second); @env its environment (None: this one's)."""

    def __init__(self, ns, sockbufd, tmp, n, args=("--interval", "10"), env=None,
                 prom="sockbufd.prom"):
        self.metrics = os.path.join(tmp, prom)
        self.log = open(os.path.join(tmp, f"sockbufd.{n}.log"), "w+")
        # `ip netns exec` and setpriv execute the daemon: its pid is the
        # daemon's, and it ends (SIGTERM) if the test is killed.
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, "setpriv", "--pdeathsig", "TERM",
                                      sockbufd, *args, "--metrics-file", self.metrics],
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

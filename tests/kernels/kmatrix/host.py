"""The same checks on this machine's own kernel, run natively.

Global settings (net.ipv4.tcp_mem, cgroups) are never changed here: the
pressure scenarios are reported as skipped.  Delay needs sch_netem; where
the host lacks it only the undelayed run happens.
"""
import json
import os
import platform
import subprocess
import uuid

ADDR_A, ADDR_B = "198.19.210.1", "198.19.210.2"


def _sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def _read(path):
    try:
        return open(path).read().strip()
    except OSError:
        return ""


class _Pair:
    """Two namespaces joined by a veth pair; removed on exit, also on failure."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.a, self.b = "sbk-host-a-" + tag, "sbk-host-b-" + tag
        self.va, self.vb = "sbkha" + tag, "sbkhb" + tag

    def __enter__(self):
        _sh("ip", "netns", "add", self.a)
        _sh("ip", "netns", "add", self.b)
        _sh("ip", "link", "add", self.va, "type", "veth", "peer", "name", self.vb)
        _sh("ip", "link", "set", self.va, "netns", self.a)
        _sh("ip", "link", "set", self.vb, "netns", self.b)
        _sh("ip", "-n", self.a, "addr", "add", ADDR_A + "/24", "dev", self.va)
        _sh("ip", "-n", self.b, "addr", "add", ADDR_B + "/24", "dev", self.vb)
        for ns, dev in ((self.a, self.va), (self.b, self.vb)):
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        return self

    def set_delay(self, rtt_ms):
        for ns, dev in ((self.a, self.va), (self.b, self.vb)):
            _sh("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
            if rtt_ms and _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem",
                              "delay", "%dus" % (rtt_ms * 500), "limit", "100000",
                              check=False).returncode:
                return False
        return True

    def __exit__(self, *exc):
        _sh("ip", "netns", "del", self.a, check=False)
        _sh("ip", "netns", "del", self.b, check=False)


def run_host(programs, profile, progress):
    sections, rc = {}, {}
    progress("host:facts")
    sections["facts"] = {
        "release": platform.release(),
        "version": _read("/proc/version"),
        "profile": profile["name"],
        "modules": {},
        "cgroup2_controllers": _read("/sys/fs/cgroup/cgroup.controllers"),
        "netem": "unknown",
        "tcp_mem": _read("/proc/sys/net/ipv4/tcp_mem"),
        "tcp_rmem": _read("/proc/sys/net/ipv4/tcp_rmem"),
        "tcp_wmem": _read("/proc/sys/net/ipv4/tcp_wmem"),
        "congestion_control": _read("/proc/sys/net/ipv4/tcp_congestion_control"),
        "cpus": os.cpu_count(),
    }
    rc["facts"] = 0
    progress("host:probe")
    r = subprocess.run([programs["sockbuf"], "probe", "--json"], capture_output=True, text=True)
    rc["probe"] = r.returncode
    sections["probe"] = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr}

    out = "/tmp/sbk-host-check-%d.json" % os.getpid()
    with _Pair() as pair:
        netem = pair.set_delay(1)
        sections["facts"]["netem"] = "yes" if netem else "no"
        for rtt in profile["rtts"]:
            name = "check-rtt%d" % rtt
            progress("host:" + name)
            if not pair.set_delay(rtt):
                sections[name] = {"skip": "no sch_netem on this kernel: no delay"}
                rc[name] = 77
                continue
            r = subprocess.run([programs["sockbuf-kernel-check"],
                                "--server-ns", "/run/netns/" + pair.a,
                                "--client-ns", "/run/netns/" + pair.b, "--addr", ADDR_A,
                                "--seconds", str(profile["seconds"]),
                                "--bytes", str(profile["bytes"]), "--rtt-ms", str(rtt),
                                "--scenarios", "untouched,initial,locked", "--json", out],
                               capture_output=True, text=True, timeout=600)
            rc[name] = r.returncode
            sections[name] = json.load(open(out)) if os.path.exists(out) else {
                "error": r.stderr[-1000:]}
        pair.set_delay(0)
    if os.path.exists(out):
        os.unlink(out)
    why = "the host's global settings (tcp_mem, cgroups) are never changed: guests only"
    for name in ("pressure-tcp_mem", "pressure-memcg"):
        sections[name] = {"skip": why}
        rc[name] = 77
    contract = programs.get("sockbuf-contract")
    if contract:
        progress("host:contract")
        cout = "/tmp/sbk-host-contract-%d.json" % os.getpid()
        r = subprocess.run([contract] + profile["contract_args"] + ["--json", cout],
                           capture_output=True, text=True, timeout=1800)
        rc["contract"] = r.returncode
        sections["contract"] = json.load(open(cout)) if os.path.exists(cout) else {
            "error": r.stderr[-1000:]}
        if os.path.exists(cout):
            os.unlink(cout)
    # The floor guard's BPF and event tests, as in the guests (init.sh).
    for name, args in (("unit", ["--gtest_filter=GuardEvents*:GuardBpf*:GuardReserve*"]),
                       ("kevents", [])):
        prog = programs.get({"unit": "sockbuf_unit_tests",
                             "kevents": "sockbuf_kernel_check_kevents_tests"}[name])
        if not prog:
            continue
        progress("host:" + name)
        out = "/tmp/sbk-host-%s-%d.json" % (name, os.getpid())
        r = subprocess.run([prog] + args + ["--gtest_output=json:" + out],
                           capture_output=True, text=True, timeout=600)
        rc[name] = r.returncode
        sections[name] = json.load(open(out)) if os.path.exists(out) else {
            "error": r.stderr[-1000:]}
        if os.path.exists(out):
            os.unlink(out)
    return sections, rc

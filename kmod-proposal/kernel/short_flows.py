#!/usr/bin/env python3
"""kernel/short_flows.py: the contract suite's short flows (issue 32).

  short_flows.py table JSON...
      Per run and scenario with flows: how long the scenario ran past its
      traffic deadline (the suite drains for at most 5 s after it:
      tests/contract/harness/engine.cc, drain_ns), flows, MB sent per flow,
      short and corrupt flows, and each short flow's shortfall (bytes the
      sender had written by the deadline minus bytes the reader verified).
      Reads run-matrix results and the JSON of `run` below alike.

  short_flows.py run --kernel BZIMAGE --name NAME --out DIR
                     [--scenario parallel] [--cpus LIST] [--hogs N] [--reps N]
      Boots BZIMAGE (everything built in, as kmod-proposal's guest configs)
      under qemu TCG with the run-matrix guest's memory and CPUs, and runs
      only `sockbuf-contract --scenario SCENARIO --allow-global-changes` in a
      memory cgroup of its own, as the matrix guest's contract step does.
      Beside it the guest samples, every second, the scenario namespace's
      TCP counters (/proc/PID/net/netstat and snmp), the global TCP memory
      (sockstat) and the sockets that still hold data (ss -tnmoi); the last
      samples cover the drain.  --cpus pins qemu (and the --hogs busy loops
      started beside it) to host CPUs, to starve the guest on purpose.
      Writes DIR/NAME-rK.json per repetition.  Run it under
      flock /tmp/sockbuf-heavy.lock.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
DRAIN_S = 5.0  # engine.cc: drain_ns
PLAN_S = {"full": {"parallel": 40}, "quick": {"parallel": 6}}


def contract_of(d):
    if "sections" in d:
        return d["sections"].get("contract") or {}
    return d


def table(paths):
    print("| run | scenario | s | s after the deadline (drain, teardown) | flows | MB/flow "
          "| short | corrupt | shortfalls (bytes) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        d = json.load(open(path))
        c = contract_of(d)
        prof = c.get("profile", "full")
        for s in c.get("scenarios", []):
            i = s.get("integrity") or {}
            if not i.get("flows"):
                continue
            plan = s.get("plan_seconds") or PLAN_S.get(prof, {}).get(s["name"])
            if plan is None:
                continue  # only scenarios whose deadline is known here
            falls = []
            for e in i.get("errors", []):
                m = re.match(r"flow ended with (\d+) of (\d+) bytes received", e)
                if m:
                    falls.append(int(m.group(2)) - int(m.group(1)))
            past = s["seconds"] - plan
            print("| %s | %s | %.2f | %.2f%s | %d | %.3f | %d | %d | %s |" % (
                os.path.basename(path), s["name"], s["seconds"], past,
                " (drain ran out)" if past >= DRAIN_S else "", i["flows"],
                i["bytes_sent"] / i["flows"] / 1e6, i.get("short_flows", 0),
                i.get("corrupt", 0), ", ".join(map(str, falls)) or "-"))


GUEST_INIT = r"""#!/bin/sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
dmesg -n 1
: "${sbk_scenario:=parallel}"
echo "@@SBK STEP contract@@"
cg=""
if mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null; then
	case " $(cat /sys/fs/cgroup/cgroup.controllers) " in
	*" memory "*)
		echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		mkdir -p /sys/fs/cgroup/sbk-contract && cg=/sys/fs/cgroup/sbk-contract ;;
	esac
fi
init_ns=$(readlink /proc/1/ns/net)
# The scenario runs in a forked child in a network namespace of its own:
# sample that namespace while it lives; keep every counter sample and the
# last ten socket listings.
sampler() {
	n=0
	while [ ! -e /tmp/stop ]; do
		for p in $(pidof sockbuf-contract); do
			ns=$(readlink /proc/$p/ns/net 2>/dev/null) || continue
			[ "$ns" = "$init_ns" ] && continue
			t=$(cut -d' ' -f1 /proc/uptime)
			{
				echo "T $t $p"
				grep '^TCP:' /proc/$p/net/sockstat
				grep '^TcpExt:' /proc/$p/net/netstat | tail -n 1
				grep '^Tcp:' /proc/$p/net/snmp | tail -n 1
			} >>/tmp/counters 2>/dev/null
			n=$((n + 1))
			{
				echo "T $t"
				nsenter -t $p -n ss -tnmoi 2>/dev/null |
					awk 'NR>1 && /^ESTAB|^FIN|^CLOSE|^LAST|^TIME/ {keep = ($2 > 0 || $3 > 0); if (keep) print; next} keep {print}'
			} >/tmp/ss.$((n % 10))
			break
		done
		sleep 1
	done
}
{ grep '^TcpExt:' /proc/net/netstat | head -n 1; grep '^Tcp:' /proc/net/snmp | head -n 1; } >/tmp/counters
sampler &
spid=$!
sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec sockbuf-contract "$@"' \
	sh "$cg" --scenario "$sbk_scenario" --allow-global-changes --json /tmp/contract.json >/tmp/contract.log 2>&1
rc=$?
touch /tmp/stop
wait $spid
echo "@@SBK-BEGIN contract@@"
cat /tmp/contract.json 2>/dev/null || echo '{}'
echo
echo "@@SBK-END contract rc=$rc@@"
echo "@@SBK-BEGIN counters@@"
cat /tmp/counters
echo "@@SBK-END counters rc=0@@"
echo "@@SBK-BEGIN ss@@"
for f in $(ls -tr /tmp/ss.* 2>/dev/null); do echo "== $f"; cat $f; done
echo "@@SBK-END ss rc=0@@"
echo "@@SBK-BEGIN tcp_mem@@"
cat /proc/sys/net/ipv4/tcp_mem /proc/loadavg
echo "@@SBK-END tcp_mem rc=0@@"
echo "@@SBK DONE@@"
poweroff -f
"""


def sections(text):
    out = {}
    for m in re.finditer(r"@@SBK-BEGIN (\S+)@@\n(.*?)\n@@SBK-END \1 rc=(-?\d+)@@", text, re.S):
        out[m.group(1)] = (m.group(2), int(m.group(3)))
    return out


def parse_counters(text):
    """Header lines first, then per sample: T uptime pid, sockstat TCP line,
    TcpExt values, Tcp values.  Returns the samples as dicts."""
    lines = text.splitlines()
    ext_names = lines[0].split()[1:]
    tcp_names = lines[1].split()[1:]
    samples, cur = [], None
    for ln in lines[2:]:
        f = ln.split()
        if not f:
            continue
        if f[0] == "T":
            cur = {"t": float(f[1])}
            samples.append(cur)
        elif f[0] == "TCP:" and cur is not None:
            kv = dict(zip(f[1::2], f[2::2]))
            cur["tcp_mem_pages"] = int(kv.get("mem", -1))
            cur["tcp_inuse"] = int(kv.get("inuse", -1))
        elif f[0] == "TcpExt:" and cur is not None:
            cur["TcpExt"] = dict(zip(ext_names, map(int, f[1:])))
        elif f[0] == "Tcp:" and cur is not None:
            cur["Tcp"] = dict(zip(tcp_names, map(int, f[1:])))
    return [s for s in samples if "TcpExt" in s]


WATCH = ["TCPTimeouts", "TCPLossProbes", "TCPRcvQDrop", "TCPMemoryPressures",
         "TCPMemoryPressuresChrono", "PruneCalled", "RcvPruned", "OfoPruned",
         "TCPBacklogDrop", "TCPZeroWindowDrop", "TCPToZeroWindowAdv", "TCPWinProbe",
         "TCPAbortOnMemory", "TCPSpuriousRTOs", "TCPSlowStartRetrans",
         "TCPSackRecovery", "TCPRenoRecovery", "TCPFastRetrans"]


def summarize(samples, t0, plan):
    """Counters at the deadline and at the last sample (the drain's end)."""
    if not samples:
        return {}
    dl = t0 + plan
    before = [s for s in samples if s["t"] <= dl]
    at_dl = before[-1] if before else samples[0]
    last = samples[-1]

    def pick(s):
        r = {k: s["TcpExt"].get(k) for k in WATCH if k in s["TcpExt"]}
        r["RetransSegs"] = s.get("Tcp", {}).get("RetransSegs")
        r["tcp_mem_pages"] = s.get("tcp_mem_pages")
        r["t_rel"] = round(s["t"] - t0, 2)
        return r
    mem = [(round(s["t"] - t0, 1), s.get("tcp_mem_pages")) for s in samples]
    return {"at_deadline": pick(at_dl), "last": pick(last), "tcp_mem_pages": mem}


def parse_ss(text, t0, plan):
    """The guest's ss listings (sockets holding data): per listing its time
    from t0, the sockets and their states, bytes queued, and the
    retransmission back-off of the senders; the full lines of the
    listings taken after the deadline (the drain)."""
    out = []
    for blk in re.split(r"^== \S+\n", text, flags=re.M):
        lines = blk.splitlines()
        if not lines or not lines[0].startswith("T "):
            continue
        t = float(lines[0].split()[1]) - t0
        socks = [ln for ln in lines if re.match(r"^(ESTAB|FIN|CLOSE|LAST|TIME|SYN)", ln)]
        det = [ln for ln in lines if "rto:" in ln]
        states = {}
        for ln in socks:
            states[ln.split()[0]] = states.get(ln.split()[0], 0) + 1
        backoff = {}
        for ln in det:
            m = re.search(r"backoff:(\d+)", ln)
            b = int(m.group(1)) if m else 0
            backoff[b] = backoff.get(b, 0) + 1
        rtos = [int(float(m.group(1))) for ln in det for m in [re.search(r"rto:([\d.]+)", ln)] if m]
        snap = {"t_rel": round(t, 2), "sockets": len(socks), "states": states,
                "send_q": sum(int(ln.split()[2]) for ln in socks),
                "recv_q": sum(int(ln.split()[1]) for ln in socks),
                "backoff": {str(k): v for k, v in sorted(backoff.items())},
                "max_rto_ms": max(rtos) if rtos else 0}
        if t >= plan:
            snap["lines"] = lines[1:400]
        out.append(snap)
    return sorted(out, key=lambda x: x["t_rel"])


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


def run(args):
    sys.path.insert(0, os.path.join(TOP, "tests", "kernels"))
    from kmatrix import boot, image  # noqa: E402
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="short-flows-")
    init = os.path.join(work, "init.sh")
    with open(init, "w") as f:
        f.write(GUEST_INIT)
    programs = {"sockbuf-contract": os.path.join(args.bin_dir, "sockbuf-contract"),
                "ss": shutil.which("ss")}
    initrd = os.path.join(work, "initrd.cpio.gz")
    image.build_initramfs(initrd, None, None, programs, init)
    cmd = boot.qemu_command(os.path.abspath(args.kernel), initrd,
                            {"sbk_scenario": args.scenario}, smp=2, mem_mb=1024)
    if args.cpus:
        cmd = ["taskset", "-c", args.cpus] + cmd
    for rep in range(1, args.reps + 1):
        hogs = []
        for _ in range(args.hogs):
            hog = ["sh", "-c", "while :; do :; done"]
            if args.cpus:
                hog = ["taskset", "-c", args.cpus] + hog
            hogs.append(subprocess.Popen(hog))
        loads, stop = [], threading.Event()

        def watch():
            while not stop.wait(5):
                loads.append(loadavg())
        th = threading.Thread(target=watch, daemon=True)
        th.start()
        started = time.time()
        date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=args.timeout)
            console, qrc = p.stdout.decode("utf-8", "replace"), p.returncode
        except subprocess.TimeoutExpired as e:
            console, qrc = (e.stdout or b"").decode("utf-8", "replace"), None
        finally:
            stop.set()
            for h in hogs:
                h.kill()
                h.wait()
        wall = time.time() - started
        sec = sections(console.replace("\r\n", "\n"))
        res = {"name": args.name, "kernel_image": os.path.abspath(args.kernel),
               "scenario": args.scenario, "date": date, "wall_seconds": round(wall, 1),
               "qemu": " ".join(cmd), "qemu_rc": qrc, "cpus": args.cpus, "hogs": args.hogs,
               "host_loadavg_1min": loads, "sections": {}}
        if "contract" in sec:
            try:
                res["sections"]["contract"] = json.loads(sec["contract"][0])
            except ValueError:
                res["sections"]["contract"] = {"unparsed": sec["contract"][0][-2000:]}
        sc = None
        for s in res["sections"].get("contract", {}).get("scenarios", []):
            if s["name"] == args.scenario:
                sc = s
        if "counters" in sec and sc is not None:
            samples = parse_counters(sec["counters"][0])
            plan = PLAN_S["full"].get(args.scenario, 40)
            res["counters"] = summarize(samples, sc["t0_mono_ns"] / 1e9, plan)
        if "ss" in sec and sc is not None:
            res["ss"] = parse_ss(sec["ss"][0], sc["t0_mono_ns"] / 1e9,
                                 PLAN_S["full"].get(args.scenario, 40))
        if "tcp_mem" in sec:
            res["guest_tcp_mem_and_loadavg"] = sec["tcp_mem"][0]
        if sc is None:
            res["console_tail"] = console[-4000:]
        path = os.path.join(args.out, "%s-r%d.json" % (args.name, rep))
        with open(path[:-5] + ".console.txt", "w") as f:
            f.write(console)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
        i = (sc or {}).get("integrity", {})
        print("%s: %.0f s wall, host load %s, scenario %.2f s, flows %s, short %s, corrupt %s"
              % (path, wall, "-".join("%.1f" % x for x in (min(loads), max(loads))) if loads
                 else "?", (sc or {}).get("seconds", -1), i.get("flows"),
                 i.get("short_flows"), i.get("corrupt")), flush=True)
    shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table")
    t.add_argument("json", nargs="+")
    r = sub.add_parser("run")
    r.add_argument("--kernel", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--scenario", default="parallel")
    r.add_argument("--bin-dir", default=os.path.join(TOP, "build", "bin"))
    r.add_argument("--cpus", default="")
    r.add_argument("--hogs", type=int, default=0)
    r.add_argument("--reps", type=int, default=1)
    r.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    if args.cmd == "table":
        table(args.json)
    else:
        run(args)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The systemd unit as configured by the build: systemd-analyze rates its
# exposure at 2.8 or better (docs/packaging.md), runs the daemon as
# Type=notify with a watchdog, bounds its memory and tasks, gives it a
# private /dev (systemd mounts /dev/shm into it), and keeps its
# capabilities to the five it needs.  Skips (77) without systemd-analyze.
# usage: unit_checks.sh UNIT_FILE
set -euo pipefail
unit=${1:?usage: unit_checks.sh UNIT_FILE}
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze (package systemd)"; exit 77; }
fail=0
if ! out=$(systemd-analyze security --offline=yes --threshold=28 "$unit" 2>&1); then
	echo "FAIL: exposure above 2.8:"; echo "$out" | tail -n 30; fail=1
else
	echo "ok: $(echo "$out" | tail -n 1)"
fi
grep -qx 'Type=notify' "$unit" || { echo "FAIL: not Type=notify"; fail=1; }
grep -qx 'CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_NET_ADMIN CAP_BPF CAP_PERFMON' "$unit" ||
	{ echo "FAIL: capability bounding set changed"; fail=1; }
grep -q '^ExecStart=/.*/sockbufd ' "$unit" || { echo "FAIL: ExecStart has no absolute path"; fail=1; }
grep -qx 'Nice=-10' "$unit" || { echo "FAIL: not ahead of the workloads (Nice=-10)"; fail=1; }
for want in 'PrivateDevices=yes' 'RuntimeDirectoryPreserve=restart' 'WatchdogSec=10s' 'MemoryMax=256M' 'TasksMax=32'; do
	grep -qx "$want" "$unit" || { echo "FAIL: no $want"; fail=1; }
done
! grep -q 'hide /dev/shm' "$unit" || { echo "FAIL: the comment that PrivateDevices hides /dev/shm"; fail=1; }
exit $fail

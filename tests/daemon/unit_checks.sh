#!/usr/bin/env bash
# The systemd unit as configured by the build: systemd-analyze rates its
# exposure at 3.0 or better (2.8 when written; docs/packaging.md), runs
# the daemon as Type=notify, and keeps its capabilities to the five it
# needs.  Skips (77) without systemd-analyze.
# usage: unit_checks.sh UNIT_FILE
set -euo pipefail
unit=${1:?usage: unit_checks.sh UNIT_FILE}
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze (package systemd)"; exit 77; }
fail=0
if ! out=$(systemd-analyze security --offline=yes --threshold=30 "$unit" 2>&1); then
	echo "FAIL: exposure above 3.0:"; echo "$out" | tail -n 30; fail=1
else
	echo "ok: $(echo "$out" | tail -n 1)"
fi
grep -qx 'Type=notify' "$unit" || { echo "FAIL: not Type=notify"; fail=1; }
grep -qx 'CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_NET_ADMIN CAP_BPF CAP_PERFMON' "$unit" ||
	{ echo "FAIL: capability bounding set changed"; fail=1; }
grep -q '^ExecStart=/.*/sockbufd ' "$unit" || { echo "FAIL: ExecStart has no absolute path"; fail=1; }
grep -qx 'Nice=-10' "$unit" || { echo "FAIL: not ahead of the workloads (Nice=-10)"; fail=1; }
exit $fail

#!/usr/bin/env bash
# What sockbufd costs while nothing is cut: PROCS processes each holding
# PAIRS loopback connections (both ends floored by `sockbuf run --policy
# initial`, published, no guard of their own) in a network namespace made
# here, and sockbufd serving them there at each --interval given; its CPU
# (utime + stime from /proc) over SECONDS, as a share of one core.  Run it
# with nothing else on the machine; the load average is printed.
#
# With GUARD_MS set the processes run their own floor guard too
# (`--floor-guard GUARD_MS`, the shim's, polling), and their CPU is
# printed beside the daemon's: an interval "none" runs no daemon, so the
# guards serve themselves; with a daemon they hand over to it.  The
# daemon's presence file is in a directory of the script's own
# (SOCKBUF_DAEMON_DIR), never the host's /run/sockbufd.
#
#   [GUARD_MS=MS] bench/lab/daemon/idle_cost.sh BUILD_DIR [PROCS] [PAIRS] [SECONDS] [INTERVALS...]
set -euo pipefail
build=${1:?usage: idle_cost.sh BUILD_DIR [PROCS] [PAIRS] [SECONDS] [INTERVAL_MS...]}
procs=${2:-2}
pairs=${3:-2500}
seconds=${4:-30}
shift $(($# < 4 ? $# : 4))
intervals=("${@:-10 100 1000}")
[[ $(id -u) == 0 ]] || { echo "idle_cost: needs root (network namespace)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
ns=sbd-idle-$$
ip netns add "$ns"
ip -n "$ns" link set lo up
pids=()
fifo_dir=$(mktemp -d)
chmod 755 "$fifo_dir"
mkdir -m 755 "$fifo_dir/run"
export SOCKBUF_DAEMON_DIR=$fifo_dir/run
guard=()
[[ -n ${GUARD_MS:-} ]] && guard=(--floor-guard "$GUARD_MS")
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$fifo_dir"
}
trap cleanup EXIT
for ((i = 0; i < procs; i++)); do
	mkfifo "$fifo_dir/in$i"
	ip netns exec "$ns" "$build/bin/sockbuf" run -q --via preload --policy initial "${guard[@]}" -- \
		python3 "$here/holder.py" "$pairs" $((7000 + i)) <"$fifo_dir/in$i" >"$fifo_dir/out$i" &
	pids+=($!)
	exec {w}>"$fifo_dir/in$i" # keeps its stdin open
done
for ((i = 0; i < procs; i++)); do
	for ((t = 0; t < 600; t++)); do
		grep -q ready "$fifo_dir/out$i" 2>/dev/null && break
		sleep 0.1
	done
	echo "holder $i: $(cat "$fifo_dir/out$i")"
done
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
holders_cpu() {
	local sum=0 p
	for p in "${pids[@]}"; do
		# `sockbuf run` execs the program: the pid is the holder's.
		sum=$((sum + $(cpu "$p")))
	done
	echo "$sum"
}
share() { awk -v c="$1" -v hz="$hz" -v s="$seconds" 'BEGIN {printf "%.2f", 100 * c / hz / s}'; }
for ms in ${intervals[@]}; do
	if [[ $ms == none ]]; then
		h0=$(holders_cpu)
		sleep "$seconds"
		h1=$(holders_cpu)
		echo "no daemon: the processes $(share $((h1 - h0))) % of a core over ${seconds} s"
		continue
	fi
	ip netns exec "$ns" "$build/bin/sockbufd" --interval "$ms" \
		--metrics-file "$fifo_dir/m.prom" 2>"$fifo_dir/d.log" &
	d=$!
	# Settled once it serves every socket.
	for ((t = 0; t < 300; t++)); do
		n=$(awk '/^sockbuf_guarded_sockets/ {s += $2} END {print s + 0}' "$fifo_dir/m.prom" 2>/dev/null || echo 0)
		((n >= procs * pairs * 2)) && break
		sleep 0.1
	done
	# With their own guards: settled once each has handed over (it
	# looks once a second).
	[[ -n ${GUARD_MS:-} ]] && sleep 2
	c0=$(cpu "$d")
	h0=$(holders_cpu)
	sleep "$seconds"
	c1=$(cpu "$d")
	h1=$(holders_cpu)
	kill -TERM "$d"
	wait "$d" || true
	echo "interval ${ms} ms: ${n} sockets guarded, CPU $(share $((c1 - c0))) % of a core over ${seconds} s;" \
		"the processes $(share $((h1 - h0))) %"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

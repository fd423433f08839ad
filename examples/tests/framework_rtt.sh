#!/bin/sh
# SPDX-License-Identifier: MIT
# framework_rtt.sh BINDIR NAME [RUNS SECONDS SIZE]: an RPC framework's
# example (NAME-server, NAME-client in BINDIR: tirpc-bulk, asio-bulk) at
# 120 ms RTT between two network namespaces (the lab's NFQUEUE delay line,
# 60 ms held on arrival each way; 198.18.33.0/24), each side's socket
# untouched (default), locked at 128 KiB (lock) or started at 128 KiB
# with autotuning on (initial, the server's floor kept by a guard on its
# listener).  RUNS rounds of the three (alternating order), SECONDS each,
# READs of SIZE; prints one row per mode (median, min-max, load average)
# and checks:
#   - every READ verified; lock: both ends locked (3), 131072, window
#     scale <= 2; initial: unlocked, at least 131072, window scale >= 7;
#   - median initial and default >= 3 x median lock;
#   - a cut of the server's accepted socket (BULK_CUT, 8 KB, locked) is
#     restored unlocked within the guard's interval + its lateness + one
#     RTT + 100 ms.
# Exit 77 (skip) without root, iptables, NFQUEUE or the delay line.
set -u
bin=$1
name=$2
runs=${3:-1}
secs=${4:-3}
size=${5:-4M}
here=$(dirname "$0")
lab=$here/../../bench/lab
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v iptables >/dev/null || { echo "SKIP: iptables not installed"; exit 77; }
[ -x "$bin/sockbuf-delayline" ] || { echo "SKIP: no delay line (libnetfilter-queue-dev)"; exit 77; }
[ -x "$bin/$name-server" ] || { echo "SKIP: $name-server not built"; exit 77; }
p=sfw$$ # veth names stay within 15 characters: sfw4194304-va
net=198.18.33
guard_ms=20
dir=$(mktemp -d)
cleanup() {
	[ -n "${srv:-}" ] && kill "$srv" 2>/dev/null
	[ -n "${dl_a:-}" ] && kill "$dl_a" 2>/dev/null
	[ -n "${dl_b:-}" ] && kill "$dl_b" 2>/dev/null
	wait 2>/dev/null
	"$lab/netns.sh" down $p
	rm -rf "$dir"
}
trap cleanup EXIT
"$lab/netns.sh" up $p $net >/dev/null 2>&1 || { echo "SKIP: cannot set up namespaces or NFQUEUE rule"; exit 77; }
mkfifo "$dir/a" "$dir/b"
ip netns exec $p-a "$bin/sockbuf-delayline" --delay-us=60000 --seconds=3600 >"$dir/a" &
dl_a=$!
ip netns exec $p-b "$bin/sockbuf-delayline" --delay-us=60000 --seconds=3600 >"$dir/b" &
dl_b=$!
exec 3<"$dir/a" 4<"$dir/b"
read -r line_a <&3 || line_a=""
read -r line_b <&4 || line_b=""
case "$line_a$line_b" in
*delay*delay*) ;;
*) echo "SKIP: delay line could not bind NFQUEUE"; exit 77 ;;
esac
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# One JSON field (a number) of a line: field LINE NAME [OBJECT]
field() {
	if [ -n "${3:-}" ]; then
		echo "$1" | sed -n "s/.*\"$3\":{[^}]*\"$2\":\([-0-9.]*\).*/\1/p"
	else
		echo "$1" | sed -n "s/^{\"$2\":\([-0-9.]*\).*/\1/p; t; s/.*[{,]\"$2\":\([-0-9.]*\).*/\1/p"
	fi
}
# run MODE [CLIENT OPTIONS...]: one server, one client; the client's line.
port=2049
run() {
	mode=$1
	shift
	port=$((port + 1))
	gopt=""
	[ "$mode" = initial ] && gopt="--floor-guard=$guard_ms"
	for ns in a b; do ip -n $p-$ns tcp_metrics flush >/dev/null 2>&1; done
	rm -f "$dir/srv"
	mkfifo "$dir/srv"
	ip netns exec $p-a "$bin/$name-server" --listen=$net.1:$port --bufs=$mode \
		--bufsize=128K $gopt --seconds=$((secs + 60)) >"$dir/srv" 2>"$dir/srv.err" &
	srv=$!
	exec 5<"$dir/srv"
	read -r ready <&5 || ready=""
	exec 5<&-
	case "$ready" in serving*) ;; *) cat "$dir/srv.err" >&2; bad "$name-server did not start"; return ;; esac
	ip netns exec $p-b "$bin/$name-client" --connect=$net.1:$port --bufs=$mode --bufsize=128K \
		--size=$size --bytes=100000M --seconds=$secs --json "$@" 2>>"$dir/cli.err"
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
	srv=""
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$runs"); do
	order="default lock initial"
	[ $((r % 2)) -eq 0 ] && order="initial lock default"
	for m in $order; do
		line=$(run $m)
		echo "$m run $r: $line"
		[ -n "$line" ] || { bad "$m: no result"; continue; }
		[ "$(field "$line" bad)" = 0 ] || bad "$m: READs failed verification"
		echo "$(field "$line" mb_s)" >>"$dir/$m"
		slock=$(field "$line" lock server)
		clock=$(field "$line" lock client)
		ssnd=$(field "$line" sndbuf server)
		ws=$(field "$line" rcv_wscale server)
		case $m in
		lock)
			[ "$slock" = 3 ] && [ "$clock" = 3 ] || bad "lock: lock bits server $slock client $clock, want 3"
			[ "$ssnd" = 131072 ] || bad "lock: server's sndbuf $ssnd, want 131072"
			[ "$ws" -le 2 ] || bad "lock: server's window scale $ws, want <= 2"
			;;
		initial)
			[ "$slock" = 0 ] && [ "$clock" = 0 ] || bad "initial: lock bits server $slock client $clock, want 0"
			[ "$ssnd" -ge 131072 ] || bad "initial: server's sndbuf $ssnd below 131072"
			[ "$ws" -ge 7 ] || bad "initial: server's window scale $ws, want >= 7"
			;;
		default)
			[ "$slock" = 0 ] || bad "default: server's lock bits $slock"
			;;
		esac
	done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
echo "| $name, 120 ms RTT, READs of $size, $runs x ${secs}s | median MB/s | min-max | load average before / after |"
echo "|---|---|---|---|"
for m in default lock initial; do
	med=$(median <"$dir/$m")
	lo=$(sort -g "$dir/$m" | head -1)
	hi=$(sort -g "$dir/$m" | tail -1)
	eval "med_$m=\${med:-0}"
	echo "| $m | $med | $lo-$hi | $load0 / $load1 |"
done
awk -v i="$med_initial" -v d="$med_default" -v l="$med_lock" 'BEGIN { exit !(i >= 3 * l && d >= 3 * l) }' ||
	bad "median initial $med_initial, default $med_default: not 3 x lock $med_lock"

# The floor on a connection the framework accepted: cut, then restored.
line=$(run initial --bytes=1M --cut-check=131072)
echo "cut check: $line"
cut=$(field "$line" cut cut)
cut_lock=$(field "$line" cut_lock cut)
after_lock=$(field "$line" after_lock cut)
ms=$(field "$line" restore_ms cut)
late=$(field "$line" guard_max_late_us cut)
[ -n "$cut" ] && [ "$cut" -lt 131072 ] && [ "$cut_lock" != 0 ] || bad "the cut did not take: $cut lock $cut_lock"
[ "$after_lock" = 0 ] || bad "not restored unlocked: lock $after_lock"
bound=$(awk -v g=$guard_ms -v l="${late:-0}" 'BEGIN { print g + l / 1000 + 120 + 100 }')
awk -v m="${ms:--1}" -v b="$bound" 'BEGIN { exit !(m >= 0 && m <= b) }' ||
	bad "restored after ${ms:-?} ms, bound $bound ms (interval $guard_ms, late ${late:-?} us, RTT 120)"
echo "restored in $ms ms (bound $bound ms)"
[ -s "$dir/cli.err" ] && sed 's/^/client: /' "$dir/cli.err" | head -20
[ $fail -eq 0 ] && echo PASS
exit $fail

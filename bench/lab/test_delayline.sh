#!/bin/sh
# SPDX-License-Identifier: MIT
# test_delayline.sh BINDIR: the lab's delay line gives the RTT it is asked
# for.  Two namespaces (sbb-dl-a/b, 198.18.31.0/24), 10 ms held on arrival
# in each, one 8 KB READ at a time: the median call latency must lie
# between 20 and 30 ms, and without the delay line below 5 ms.
# Exit 77 (skip) without root or without NFQUEUE support.
set -u
bin=$1
here=$(dirname "$0")
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v iptables >/dev/null || { echo "SKIP: iptables not installed"; exit 77; }
p=sbb-dl
cleanup() {
	[ -n "${dl_a:-}" ] && kill "$dl_a" 2>/dev/null
	[ -n "${dl_b:-}" ] && kill "$dl_b" 2>/dev/null
	wait 2>/dev/null
	"$here/netns.sh" down $p
}
trap cleanup EXIT
"$here/netns.sh" down $p
"$here/netns.sh" up $p 198.18.31 || { echo "SKIP: cannot set up namespaces or NFQUEUE rule"; exit 77; }

# Median latency (ms) of one-at-a-time 8 KB READs, or empty on failure.
p50_ms() {
	ip netns exec $p-a "$bin/rpc-server" --listen=198.18.31.1:2049 --max-clients=1 \
		--seconds=30 >/dev/null &
	srv=$!
	out=""
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		out=$(ip netns exec $p-b "$bin/rpc-client" --connect=198.18.31.1:2049 --op=read \
			--size=8K --slots=1 --seconds=1 --json 2>/dev/null) && break
	done
	wait $srv
	echo "$out" | sed -n 's/.*"p50_us":\([0-9.]*\).*/\1/p' | awk '{ printf "%d", $1 / 1000 }'
}

base=$(p50_ms)
echo "no delay line: p50 ${base:-?} ms"
[ -n "$base" ] && [ "$base" -lt 5 ] || { echo "FAIL: undelayed p50 '$base' ms"; exit 1; }

# Each delay line prints a line once its queue is bound (or exits: EOF).
dir=$(mktemp -d)
mkfifo "$dir/a" "$dir/b"
ip netns exec $p-a "$bin/sockbuf-delayline" --delay-us=10000 --seconds=30 >"$dir/a" &
dl_a=$!
ip netns exec $p-b "$bin/sockbuf-delayline" --delay-us=10000 --seconds=30 >"$dir/b" &
dl_b=$!
exec 3<"$dir/a" 4<"$dir/b"
read -r line_a <&3 || line_a=""
read -r line_b <&4 || line_b=""
rm -rf "$dir"
case "$line_a$line_b" in
*delay*delay*) ;;
*) echo "SKIP: delay line could not bind NFQUEUE"; exit 77 ;;
esac
rtt=$(p50_ms)
echo "10 ms each way: p50 ${rtt:-?} ms"
[ -n "$rtt" ] && [ "$rtt" -ge 20 ] && [ "$rtt" -le 30 ] || { echo "FAIL: p50 '$rtt' ms, want 20-30"; exit 1; }
echo PASS

#!/bin/sh
# Lab script for bench/lab/guest/run.py: many rpc connections at once and
# what their server's buffer sizing does to the rest of the machine.
# One server (namespace a) sized per run (default, lock 16 MB, initial 16
# MB unlocked: see rpc_netem.sh), lab_clients clients reading from it at
# once, and beside them a bystander: a second server with the kernel's
# sizes and one client.  Over a veth pair delayed by netem (lab_rtt ms).
# Per run: the clients' summed MB/s, their p99 latencies (median and
# worst), the bystander's MB/s and p99, the most TCP memory in use
# (/proc/net/sockstat, pages, sampled every 200 ms), and the kernel's
# TCPMemoryPressures count over the run.  lab_tcp_mem (e.g. "2000 3000
# 4000") lowers net.ipv4.tcp_mem for the whole guest first; lab_memcg
# (bytes) runs the big server in a memory cgroup and gives its *sockets*
# that many bytes (cgroup v2 charges socket memory to the cgroup of the
# task that accepted the socket).  Its own memory is not limited: one
# second into the run, when every client is connected and the server's
# buffers are allocated, memory.max becomes the cgroup's memory that is
# not socket memory (memory.current less memory.stat's sock) plus
# lab_memcg; memcg_sock_peak is the most socket memory seen after that.
# The server runs with oom_score_adj -1000: a socket charge over the
# limit then finds no task to kill and fails, which is the
# memcg cut of a socket's send buffer (an earlier form of this lab, with
# memory.max fixed from the start, had the server OOM-killed).
# One line per run: "@@ many rtt=R bufs=B clients=N {...}".
set -u
. /usr/bin/lab-net.sh
n=${lab_clients:-100}
rtt=${lab_rtt:-120}
secs=${lab_secs:-10}
bufs_list=$(echo "${lab_bufs:-default,lock,initial}" | tr , ' ')
mkdir -p /tmp/many
veth_pair many || exit 1
netem_rtt many $rtt 500000 || exit 1
if [ -n "${lab_tcp_mem:-}" ]; then
	echo "$lab_tcp_mem" | tr _ ' ' >/proc/sys/net/ipv4/tcp_mem
fi
echo "@@ many: tcp_mem $(cat /proc/sys/net/ipv4/tcp_mem), $(nproc) CPUs, $(grep MemTotal /proc/meminfo)"
# The TCPMemoryPressures counter of the servers' namespace (the MIB
# counters are per network namespace; tcp_mem and sockstat's mem are not).
pressures() {
	ip netns exec a cat /proc/net/netstat | awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) k[i] = $i; h = 1 }
		else for (i = 1; i <= NF; i++) if (k[i] == "TCPMemoryPressures") print $i }'
}
# A number field of a client's JSON line ("" if absent); num: 0 if absent.
field() { sed -n "s/.*\"$1\":\\([0-9.e+-]*\\).*/\\1/p" "$2"; }
num() { v=$(field "$1" "$2"); echo "${v:-0}"; }
port=7000
for b in $bufs_list; do
	port=$((port + 2))
	size=""
	[ "$b" = default ] || size="--bufsize=16M --force"
	rm -f /tmp/many/*
	cg=""
	if [ -n "${lab_memcg:-}" ]; then
		cg=/sys/fs/cgroup/many-$b
		mkdir -p $cg && echo max >$cg/memory.max || { echo "@@ many: no memcg"; exit 1; }
	fi
	# The server joins the cgroup before it execs: sh -c's own $$.
	if [ -n "$cg" ]; then
		sh -c 'echo $$ >"$1/cgroup.procs" && echo -1000 >/proc/self/oom_score_adj && shift &&
			exec "$@"' sh "$cg" \
			/usr/sbin/ip netns exec a /usr/bin/rpc-server --listen=198.18.0.1:$port --bufs=$b $size \
			--max-clients=$n --threads=8 --seconds=$((secs + 180)) >/tmp/many/srv 2>&1 &
	else
		/usr/sbin/ip netns exec a /usr/bin/rpc-server --listen=198.18.0.1:$port --bufs=$b $size \
			--max-clients=$n --threads=8 --seconds=$((secs + 180)) >/tmp/many/srv 2>&1 &
	fi
	srv=$!
	ip netns exec a /usr/bin/rpc-server --listen=198.18.0.1:$((port + 1)) --bufs=default \
		--max-clients=1 --threads=2 --seconds=$((secs + 180)) >/tmp/many/by-srv 2>&1 &
	by_srv=$!
	i=0
	while ! { grep -q listening /tmp/many/srv && grep -q listening /tmp/many/by-srv; } && [ $i -lt 100 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	p0=$(pressures)
	k=0
	pids=""
	while [ $k -lt $n ]; do
		ip netns exec b /usr/bin/rpc-client --connect=198.18.0.1:$port --op=read --size=256K \
			--slots=4 --bytes=64G --seconds=$secs --json >/tmp/many/c$k 2>&1 &
		pids="$pids $!"
		k=$((k + 1))
	done
	ip netns exec b /usr/bin/rpc-client --connect=198.18.0.1:$((port + 1)) --op=read --size=256K \
		--slots=4 --bytes=64G --seconds=$secs --json >/tmp/many/by 2>&1 &
	by=$!
	# Sample TCP memory until the bystander (started last) ends; bounded
	# by its --seconds and a margin.
	peak=0
	t=0
	limit=0
	other=0
	sock_peak=0
	while kill -0 $by 2>/dev/null && [ $t -lt $(((secs + 60) * 5)) ]; do
		m=$(awk '/^TCP:/ { for (i = 1; i <= NF; i++) if ($i == "mem") print $(i + 1) }' /proc/net/sockstat)
		[ "${m:-0}" -gt $peak ] && peak=$m
		# Socket memory from the second the limit is set on.
		if [ -n "$cg" ] && [ $t -ge 5 ]; then
			sock=$(awk '$1 == "sock" { print $2 }' $cg/memory.stat)
			[ $t -gt 5 ] && [ "${sock:-0}" -gt $sock_peak ] && sock_peak=$sock
			if [ $t -eq 5 ]; then
				other=$(($(cat $cg/memory.current) - ${sock:-0}))
				limit=$((other + lab_memcg))
				echo $limit >$cg/memory.max
			fi
		fi
		t=$((t + 1))
		sleep 0.2
	done
	wait $by
	for p in $pids; do wait $p; done
	p1=$(pressures)
	sum=0
	errs=0
	: >/tmp/many/p99
	for f in /tmp/many/c*; do
		mb=$(field MBps "$f")
		if [ -z "$mb" ]; then errs=$((errs + 1)); continue; fi
		sum=$(awk -v a="$sum" -v b="$mb" 'BEGIN { print a + b }')
		field p99_us "$f" >>/tmp/many/p99
	done
	p99=$(sort -n /tmp/many/p99 | awk '{ v[NR] = $1 } END { if (NR) printf "%.0f %.0f", v[int((NR + 1) / 2)], v[NR]; else print "0 0" }')
	events=""
	[ -n "$cg" ] && events=$(tr '\n' ' ' <$cg/memory.events)
	echo "@@ many rtt=$rtt bufs=$b clients=$n {\"memcg_events\":\"$events\",\"memcg_limit\":$limit,\"memcg_not_sock\":$other,\"memcg_sock_peak\":$sock_peak,\"sum_MBps\":$sum,\"clients_failed\":$errs,\"p99_us_median\":${p99% *},\"p99_us_worst\":${p99#* },\"bystander_MBps\":$(num MBps /tmp/many/by),\"bystander_p99_us\":$(num p99_us /tmp/many/by),\"tcp_mem_peak_pages\":$peak,\"memory_pressures\":$((p1 - p0)),\"server\":\"$(head -1 /tmp/many/srv | tr -d '"')\"}"
	kill $srv $by_srv 2>/dev/null
	wait $srv $by_srv 2>/dev/null
	if [ -n "$cg" ]; then rmdir $cg 2>/dev/null || true; fi
done

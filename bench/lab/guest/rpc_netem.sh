#!/bin/sh
# Lab script for bench/lab/guest/run.py: the rpc example's READs (payload
# in the server's replies) between two namespaces over a veth pair
# delayed by netem (RTT/2 each way), per RTT and per server sizing:
#   default   the kernel's sizes, autotuning on;
#   lock      16 MB send and receive, locked (SO_*BUFFORCE: the 2026 NFSD
#             patch's 4 x sv_max_mesg with both lock bits);
#   initial   16 MB, unlocked (sockbuf_set_initial_bufsize with force).
# The client's tcp_rmem[2] is 32 MB (lab-net.sh).  One JSON line per run, "@@ rpc rtt=R bufs=B {...}".
# Variables: lab_rtts (default 50,120,250), lab_secs (10), lab_size (1M),
# lab_slots (16), lab_bufs (default,lock,initial).
set -u
. /usr/bin/lab-net.sh
rtts=$(echo "${lab_rtts:-50,120,250}" | tr , ' ')
bufs_list=$(echo "${lab_bufs:-default,lock,initial}" | tr , ' ')
secs=${lab_secs:-10}
veth_pair rpc || exit 1
port=6000
for rtt in $rtts; do
	netem_rtt rpc $rtt 200000 || exit 1
	for b in $bufs_list; do
		port=$((port + 1))
		size=""
		[ "$b" = default ] || size="--bufsize=16M --force"
		ip netns exec a /usr/bin/rpc-server --listen=198.18.0.1:$port --bufs=$b $size \
			--max-clients=1 --threads=4 --seconds=$((secs + 120)) >/tmp/srv.out 2>&1 &
		srv=$!
		# Bounded: the server prints its listening line at once.
		i=0
		while ! grep -q listening /tmp/srv.out && [ $i -lt 100 ]; do
			i=$((i + 1))
			sleep 0.1
		done
		out=$(ip netns exec b /usr/bin/rpc-client --connect=198.18.0.1:$port --op=read \
			--size=${lab_size:-1M} --slots=${lab_slots:-16} --bytes=64G --seconds=$secs --json 2>&1 | tail -1)
		wait $srv
		echo "@@ rpc rtt=$rtt bufs=$b server=\"$(head -1 /tmp/srv.out)\" $out"
	done
done

#!/bin/sh
# Sourced by the rpc lab scripts (run.py puts it in every lab guest as
# /usr/bin/lab-net.sh): two namespaces a (198.18.0.1) and b (198.18.0.2)
# on a veth pair, clients' tcp_rmem[2] at 32 MB so that a receive window
# is never the limit, no cached metrics between runs; and netem on both
# sides.  busybox's ip and tc lack netns and netem: iproute2's by path.
ip() { /usr/sbin/ip "$@"; }
tc() { /usr/sbin/tc "$@"; }

# veth_pair TAG: the pair, or "@@ TAG: no netns|no veth" and false.
veth_pair() {
	mkdir -p /run/netns
	ip netns add a && ip netns add b || { echo "@@ $1: no netns"; return 1; }
	ip link add va netns a type veth peer name vb netns b || { echo "@@ $1: no veth"; return 1; }
	ip -n a addr add 198.18.0.1/24 dev va
	ip -n b addr add 198.18.0.2/24 dev vb
	for ns in a b; do
		ip -n $ns link set lo up
		ip netns exec $ns sysctl -qw net.ipv4.tcp_rmem="4096 131072 33554432"
		ip netns exec $ns sysctl -qw net.ipv4.tcp_no_metrics_save=1
	done
	ip -n a link set va up
	ip -n b link set vb up
}

# netem_rtt TAG RTT_MS LIMIT: RTT/2 each way, queues of LIMIT packets.
netem_rtt() {
	tc -n a qdisc replace dev va root netem delay $(($2 / 2))ms limit $3 || { echo "@@ $1: no netem"; return 1; }
	tc -n b qdisc replace dev vb root netem delay $(($2 / 2))ms limit $3
}

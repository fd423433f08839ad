#!/bin/sh
# SPDX-License-Identifier: MIT
# netns.sh up|down [PREFIX] [NET]: two network namespaces joined by a veth
# pair, PREFIX-a (NET.1) and PREFIX-b (NET.2), NET default 198.18.30, each
# with a rule (iptables mangle PREROUTING) that hands every packet arriving
# on its veth to NFQUEUE 0 when a delay line is listening (bypass: packets
# pass untouched when none is).
# Only namespace-local settings are touched.
set -eu
cmd=${1:?usage: netns.sh up|down [PREFIX] [NET]}
p=${2:-sbb-lab}
net=${3:-198.18.30}
case "$cmd" in
up)
	ip netns add "$p-a"
	ip netns add "$p-b"
	ip link add "$p-va" netns "$p-a" type veth peer name "$p-vb" netns "$p-b"
	ip -n "$p-a" addr add "$net.1/24" dev "$p-va"
	ip -n "$p-b" addr add "$net.2/24" dev "$p-vb"
	for ns in a b; do
		ip -n "$p-$ns" link set lo up
		ip -n "$p-$ns" link set "$p-v$ns" up
		# The xt NFQUEUE target (this kernel has no nft queue expression).
		ip netns exec "$p-$ns" iptables -t mangle -A PREROUTING -i "$p-v$ns" \
			-j NFQUEUE --queue-num 0 --queue-bypass
	done
	;;
down)
	ip netns del "$p-a" 2>/dev/null || true
	ip netns del "$p-b" 2>/dev/null || true
	;;
*)
	echo "usage: netns.sh up|down [PREFIX] [NET]" >&2
	exit 2
	;;
esac

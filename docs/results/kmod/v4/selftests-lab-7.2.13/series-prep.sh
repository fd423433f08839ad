#!/usr/bin/env bash
# After stock-from-net.sh: put back net 1/2's include/net/sock.h with an
# mtime older than every object. The includers' objects were compiled
# with exactly that content (the net build), except those recompiled for
# stock: net/core/sock.c, net/ipv4/tcp.c and the five samples, which are
# touched (ccache has their net-content compilations). tcp_input.c and
# the sunrpc files are build-arms.sh's: it compares contents and copies
# what differs, so what includes sunrpc/svc.h recompiles as it should.
set -euo pipefail
C=/var/cache/sockbuf-kmod src=$C/nfs-src
net_sock_h=$C/nfs-src/.lab-applied.d # patches of net
tmp=$(mktemp -d)
mkdir -p "$tmp/include/net"
cp $C/pristine-7.2.13-1/linux-source-7.2/include/net/sock.h "$tmp/include/net/sock.h"
(cd "$tmp" && git apply --include=include/net/sock.h "$net_sock_h/0001-net-moderate-a-reserved-send-buffer-no-lower-than-it.patch")
cp "$tmp/include/net/sock.h" "$src/include/net/sock.h"
touch -r $C/pristine-7.2.13-1/linux-source-7.2/include/net/sock.h "$src/include/net/sock.h"
grep -q sk_reserved_sndbuf "$src/include/net/sock.h"
for f in net/core/sock.c net/ipv4/tcp.c net/ipv4/udp.c net/ipv4/tcp_output.c net/ipv4/tcp_ipv4.c net/core/skbuff.c net/sunrpc/svcsock.c; do
	touch "$src/$f"
done
rm -rf "$tmp"
ls -l --time-style=full-iso "$src/include/net/sock.h"

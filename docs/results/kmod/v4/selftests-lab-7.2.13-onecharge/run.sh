#!/bin/bash
set -u
C=/var/cache/sockbuf-kmod
O=/tmp/kv4n2/lab2
cd /work/wt/kmod-v4
run() { echo "== $1 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"; shift; timeout 600 nice -n 19 bash kmod-proposal/kernel/selftest-guest.sh "$@"; }
run debian $O/debian-7.2.13 $C/debian-7.2.13/root/usr/lib/modules/7.2.13+deb14-amd64/vmlinuz:debian-7.2.13 --runs 3 --sock-reps 10
for k in selftest-stock:stock nfs-net:net nfs-series:series; do
	run ${k#*:} $O/${k#*:} $C/${k%:*}.bzImage:${k#*:} --runs 3
done
run net-reps20 $O/net-reps20 $C/nfs-net.bzImage:net --runs 2 --sock-reps 20
run series-reps20 $O/series-reps20 $C/nfs-series.bzImage:series --runs 1 --sock-reps 20
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"

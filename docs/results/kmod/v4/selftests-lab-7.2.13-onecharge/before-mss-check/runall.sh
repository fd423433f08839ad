#!/bin/bash
set -u
C=/var/cache/sockbuf-kmod
O=/tmp/kv4n2/lab
cd /work/wt/kmod-v4
for k in selftest-stock:stock nfs-net:net nfs-series:series; do
	n=${k#*:}
	echo "== $n $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
	nice -n 19 bash kmod-proposal/kernel/selftest-guest.sh $O/$n $C/${k%:*}.bzImage:$n --runs 3
done
echo "== net-reps $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n 19 bash kmod-proposal/kernel/selftest-guest.sh $O/net-reps20 $C/nfs-net.bzImage:net --runs 2 --sock-reps 20
echo "== series-reps $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n 19 bash kmod-proposal/kernel/selftest-guest.sh $O/series-reps20 $C/nfs-series.bzImage:series --runs 1 --sock-reps 20
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"

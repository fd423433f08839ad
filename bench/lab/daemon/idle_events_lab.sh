#!/bin/sh
# Lab script for bench/lab/guest/run.py: what sockbufd costs while nothing
# is cut, with its event programs (one set for the guest) and polling.
# lab_procs processes (sockbuf_idle_publisher) each hold lab_conns idle
# loopback connections whose senders have a published floor; for each
# arm of lab_arms ("on off": --events on, then off, at the daemon's
# default intervals: passes every 100 ms when polling, with events only
# the safety net every 60 s) the daemon is started, waited for until it
# guards every floored socket, and its CPU (every thread's schedstat)
# read over lab_secs seconds, with its passes and records; the arms
# alternate lab_rounds times.
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
procs=${lab_procs:-2}
conns=${lab_conns:-5000}
secs=${lab_secs:-120}
want=$((procs * conns))
cpu_ns() {
	cat /proc/$1/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'
}
metric() {
	awk -v m="$1" 'index($1, m) == 1 && (substr($1, length(m) + 1, 1) == "{" || length($1) == length(m)) {s += $2} END {printf "%.0f", s}' /tmp/m.prom 2>/dev/null
}
pubs=
i=0
while [ $i -lt "$procs" ]; do
	/usr/bin/sockbuf_idle_publisher "$conns" 131072 3600 >/tmp/p$i.out 2>&1 &
	pubs="$pubs $!"
	i=$((i + 1))
done
i=0
while [ $i -lt "$procs" ]; do
	t=0
	until grep -q '^ready' /tmp/p$i.out 2>/dev/null || [ $t -ge 1200 ]; do
		sleep 0.5
		t=$((t + 1))
	done
	echo "@@ publisher $i: $(head -1 /tmp/p$i.out)"
	i=$((i + 1))
done
arms=
r=0
while [ $r -lt "${lab_rounds:-1}" ]; do
	arms="$arms ${lab_arms:-on off}"
	r=$((r + 1))
done
for arm in $arms; do
	rm -f /tmp/m.prom
	/usr/bin/sockbufd --events "$arm" --metrics-file /tmp/m.prom 2>/tmp/d.log &
	d=$!
	t=0
	g=0
	while [ $t -lt 1200 ]; do
		g=$(metric sockbuf_guarded_sockets)
		[ "${g:-0}" -ge "$want" ] && break
		sleep 0.5
		t=$((t + 1))
	done
	echo "@@ events=$arm: $g of $want floored sockets guarded after $((t / 2)) s; $(head -1 /tmp/d.log)"
	sleep 2
	p0=$(metric sockbuf_passes_total)
	c0=$(cpu_ns $d)
	sleep "$secs"
	c1=$(cpu_ns $d)
	sleep 1.1 # the metrics file is written every second
	p1=$(metric sockbuf_passes_total)
	echo "@@ events=$arm: daemon CPU $c0 -> $c1 ns over $secs s: $(awk -v a="$c0" -v b="$c1" -v s="$secs" 'BEGIN {printf "%.3f %% of a core", (b - a) / 1e7 / s}'); passes $((p1 - p0)); records $(metric sockbuf_event_records_total); restores $(metric sockbuf_restores_total)"
	kill -TERM $d
	wait $d
done
kill $pubs
wait
echo "@@ load $(cat /proc/loadavg)"

#!/bin/sh
# Lab script for bench/lab/guest/run.py: sockbufd (events, one program
# set for the guest) against each process's own polling guard, for a
# fleet of unprivileged processes whose senders the kernel cuts under the
# guest's lowered tcp_mem, every dip timed by the kernel-clock judge
# (sockbuf_fleet_judge).  The arms alternate lab_rounds times, tcp_mem
# put back between them.  lab_procs, lab_socks, lab_secs, lab_floor,
# lab_tcp_mem (pages, "_" for spaces), lab_rounds, lab_fleet_nice (the
# fleet's nice value; the daemon runs at 0), lab_cgroups.
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
grep -q '^nobody:' /etc/passwd 2>/dev/null || echo 'nobody:x:65534:65534:nobody:/:/bin/false' >> /etc/passwd
grep -q '^nogroup:' /etc/group 2>/dev/null || echo 'nogroup:x:65534:' >> /etc/group
chmod 1777 /dev/shm
# As systemd runs services: the daemon and the fleet each in a cgroup of
# its own with the cpu controller (lab_cgroups=1), so that CPU is shared
# between the two groups, not among their threads.
cg=/sys/fs/cgroup
if [ "${lab_cgroups:-0}" = 1 ]; then
	echo +cpu > $cg/cgroup.subtree_control
	mkdir -p $cg/daemon $cg/fleet
fi
normal=$(cat /proc/sys/net/ipv4/tcp_mem)
low=$(echo "${lab_tcp_mem:-96_128_192}" | tr '_' ' ')
echo "@@ tcp_mem normal: $normal; under pressure: $low"
arm() {
	d=
	if [ "$1" = daemon ]; then
		/usr/bin/sockbufd --events on --interval 100 --metrics-file /tmp/m.prom 2>/tmp/d.log &
		d=$!
		[ "${lab_cgroups:-0}" = 1 ] && echo $d > $cg/daemon/cgroup.procs
	fi
	[ "${lab_cgroups:-0}" = 1 ] && echo $$ > $cg/fleet/cgroup.procs
	/usr/bin/sockbuf_fleet_judge --arm "$1" ${lab_procs:-50} ${lab_socks:-200} ${lab_secs:-20} ${lab_floor:-131072} ${lab_fleet_nice:-0} |
		while read -r line; do
			echo "@@ $1: $line"
			[ "$line" = go ] && echo "$low" > /proc/sys/net/ipv4/tcp_mem
		done
	echo "$normal" > /proc/sys/net/ipv4/tcp_mem
	[ "${lab_cgroups:-0}" = 1 ] && echo $$ > $cg/cgroup.procs
	if [ -n "$d" ]; then
		echo "@@ daemon: CPU $(awk '{print ($14 + $15) / 100}' /proc/$d/stat) s"
		kill -TERM $d
		wait $d
		head -2 /tmp/d.log | sed 's/^/@@ daemon: /'
		grep -E '^sockbuf_(restores_total|event_records|below_floor_seconds_(count|sum))' /tmp/m.prom | sed 's/^/@@ daemon: /'
	fi
}
r=0
while [ $r -lt ${lab_rounds:-1} ]; do
	arm daemon
	arm own
	r=$((r + 1))
done

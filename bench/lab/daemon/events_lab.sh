#!/bin/sh
# Lab script for bench/lab/guest/run.py: sockbufd with its event source
# (one program set for the guest) keeps the floors of a process that
# guards nothing itself (sockbuf_cut_publisher), whose senders the kernel
# cuts once the lab lowers tcp_mem (the guest's own: it dies with it).
# Prints the daemon's start line, the publisher's own sampling, and the
# daemon's metrics (a copy taken while the publisher lives).  lab_conns,
# lab_floor, lab_secs, lab_tcp_mem (pages, "min pressure max"), lab_events
# (on|off).
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
echo "@@ tcp_mem before: $(cat /proc/sys/net/ipv4/tcp_mem)"
/usr/bin/sockbufd --events ${lab_events:-on} --interval 100 --metrics-file /tmp/m.prom 2>/tmp/d.log &
d=$!
/usr/bin/sockbuf_cut_publisher ${lab_conns:-8} ${lab_floor:-262144} 1 >/dev/null
# The pressure: the publisher's senders fill their queues past it.
echo "${lab_tcp_mem:-96 128 192}" | tr '_' ' ' > /proc/sys/net/ipv4/tcp_mem
echo "@@ tcp_mem: $(cat /proc/sys/net/ipv4/tcp_mem)"
secs=${lab_secs:-20}
/usr/bin/sockbuf_cut_publisher ${lab_conns:-8} ${lab_floor:-262144} $secs &
p=$!
# The metrics while the publisher still lives: sockbufd removes an exited
# process's series at its next write, so a file read after the publisher
# exits may have lost its restores.  The file is replaced by rename():
# the copy is one whole write, 1 s before the publisher's end.
sleep $((secs - 1))
cp /tmp/m.prom /tmp/m.keep
wait $p
echo "@@ publisher rc $?"
kill -TERM $d
wait $d
echo "@@ daemon rc $?"
sed 's/^/@@ daemon: /' /tmp/d.log | head -40
grep -E '^sockbuf_(restores|dips|below_floor_seconds_(count|sum)|below_floor_seconds_bucket|event|passes_total|guarded)' /tmp/m.keep | sed 's/^/@@ /'

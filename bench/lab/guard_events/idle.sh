#!/bin/sh
# Lab script for bench/lab/guest/run.py: the guard's cost with nothing cut
# (guard_idle_cost), then the event programs' cost on a bulk transfer
# (guard_events_cost --bpf-stats) when lab_bulk_rounds is set.
echo "@@ probe: $(/usr/bin/sockbuf probe 2>&1 | grep -i 'events' | head -1)"
/usr/bin/sockbuf_guard_idle_cost ${lab_secs:-60} ${lab_rounds:-3} ${lab_n:-10000} ${lab_arms:-poll,bpf,events,events+bpf}
echo "@@ idle rc $?"
if [ -n "$lab_bulk_rounds" ]; then
	/usr/bin/sockbuf_guard_events_cost --bpf-stats ${lab_bulk_secs:-3} $lab_bulk_rounds ${lab_n:-10000}
	echo "@@ bulk rc $?"
fi

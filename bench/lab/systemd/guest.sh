#!/bin/bash
# In the guest (Debian 12, systemd as PID 1), run once by sockbuf-lab.service
# after multi-user.target: sockbufd.service from the installed sockbuf-tools
# package, started, checked, restarted and stopped with systemctl, serving
# a process run as nobody by systemd-run.  Every line goes to the serial
# console prefixed "LAB " and to /lab-out/guest.log; the last line is
# "LAB RESULT: pass" or "LAB RESULT: fail (N checks)".  Each command has a
# time limit; the unit powers the guest off when this script ends.
set -u
out=/lab-out
mkdir -p "$out"
exec > >(tee "$out/guest.log" | sed -u 's/^/LAB /' >/dev/console) 2>&1
fails=0
port=5611
bytes=1048576
floor=131072  # the listener's SO_RCVBUF 65536, as the kernel stores it

say() { echo "$*"; }
step() { echo; echo "== $*"; }
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { # check WHAT COMMAND...: the command's status decides
	local what=$1; shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
# cmd ARGS...: show the command and its output (bounded: 120 s)
cmd() {
	echo "# $*"
	timeout 120 "$@" 2>&1
	local rc=$?
	[[ $rc == 0 ]] || echo "(exit $rc)"
	return $rc
}
until_true() { # until_true SECONDS 'SHELL TEST': evaluated again each time
	local end=$((SECONDS + $1)); shift
	while ! eval "$*" >/dev/null 2>&1; do
		((SECONDS < end)) || return 1
		sleep 0.2
	done
}
served_by() { # served_by PID FD
	sockbuf show "$1" --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(next((s.get("served_by") for s in j.get("sockets", []) if s["fd"] == int(sys.argv[1])), "no-such-socket"))' "$2"
}
expect_served_by() { # expect_served_by WANT WHEN: the server's connection's served_by
	who=$(served_by "$pid" "$fd")
	say "sockbuf show $pid --json: fd $fd served_by \"$who\" ($2)"
	check "served_by $1 $2" test "$who" = "$1"
}
said_stopped() { # said_stopped PID: the daemon's last line in the journal
	journalctl -b -o cat _PID="$1" | grep -qx 'sockbufd: stopped'
}
metric() { # metric NAME [LABEL=\"VALUE\"...]: the sum of the samples with every label
	local n=$1; shift
	awk -v n="$n" -v want="$*" 'BEGIN { k = split(want, w, " ") }
		$1 ~ "^"n"([{]|$)" { for (i = 1; i <= k; i++) if (!index($1, w[i])) next; s += $2; f = 1 }
		END { if (f) print s; else print "none" }' /run/sockbufd/metrics.prom 2>/dev/null
}

step "guest"
say "date: $(date -u +%FT%TZ)"
say "kernel: $(uname -r)"
say "PID 1: $(cat /proc/1/comm), $(systemctl --version | head -n 1)"
say "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
say "sockbuf-tools: $(dpkg-query -W -f '${Version}' sockbuf-tools)"
if [[ -r /sys/kernel/btf/vmlinux ]]; then say "BTF: /sys/kernel/btf/vmlinux present"; else say "BTF: none"; fi
check "PID 1 is systemd" test "$(cat /proc/1/comm)" = systemd
cmd systemctl is-system-running  # "starting": this unit's own job runs
cmd systemctl is-enabled sockbufd
cmd systemctl cat sockbufd --no-pager | grep -E '^(#|Type|ExecStart|RuntimeDirectory)'

step "a server run as nobody (systemd-run), its floor published by the shim"
mkdir -p /run/lab
mkfifo -m 0666 /run/lab/server.in
# Held open read-write: the server's reads block until the lab writes a
# line, and nobody's open of the fifo does not wait for a writer.
exec 3<>/run/lab/server.in
install -m 0644 -o nobody -g nogroup /dev/null /run/lab/shim.log
cmd systemd-run --unit=lab-server --uid=nobody --gid=nogroup \
	-p StandardOutput=file:/run/lab/server.out -p StandardError=file:/run/lab/server.err \
	/bin/sh -c "exec sockbuf run -q --via preload --policy initial --floor-guard 10 \
--log /run/lab/shim.log -- python3 /lab/py_listener.py 127.0.0.1 $port $bytes </run/lab/server.in"
until_true 60 'grep -q listening /run/lab/server.out'
say "server: $(head -n 1 /run/lab/server.out)"
cmd timeout 60 python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1', $port)); \
s.sendall(bytes($bytes)); s.close()"
until_true 60 'grep -q fd= /run/lab/server.out'
say "server: $(sed -n 2p /run/lab/server.out)"
pid=$(systemctl show -p MainPID --value lab-server)
fd=$(sed -n 's/.*fd=\([0-9]*\).*/\1/p' /run/lab/server.out)
cmd ps -o user,pid,comm,args -p "$pid"
check "the server runs as nobody" test "$(ps -o user= -p "$pid")" = nobody
check "the shim published the connection's floor" test -n "$fd"
fd=${fd:-0}
expect_served_by guard "before sockbufd"
say "cut from outside: $(timeout 30 python3 /lab/cut.py "$pid" "$fd" "$floor")" ||
	bad "the process's own guard did not restore the cut"

step "systemctl start sockbufd"
t0=$(date +%s%N)
cmd systemctl start sockbufd
say "start returned after $((($(date +%s%N) - t0) / 1000000)) ms"
state=$(systemctl is-active sockbufd)
say "systemctl is-active sockbufd: $state"
check "sockbufd active (Type=notify: READY=1 reached)" test "$state" = active
cmd systemctl show sockbufd -p Type -p ActiveState -p SubState -p MainPID -p StatusText \
	-p NRestarts -p Result -p NotifyAccess
cmd systemctl status sockbufd --no-pager -l -n 20
until_true 10 'grep -q "serves these floors" /run/lab/shim.log'
cmd cat /run/lab/shim.log
check "the shim said sockbufd serves its floors" grep -q 'sockbufd (pid [0-9]*) serves these floors' /run/lab/shim.log
expect_served_by daemon "with sockbufd"
cmd sockbuf show "$pid" --json
until_true 10 'test "$(metric sockbuf_guarded_sockets comm=\"python3\")" != none'
# With events, a setsockopt(2) cut is no kernel function the programs
# watch: the daemon's full pass (--net-interval, 60 s) restores it
# (sockbufd(8)).  Polling restores it within --interval (100 ms).
before=$(metric sockbuf_restores_total comm='"python3"' found='"pass"' source='"daemon"')
say "cut from outside: $(timeout 90 python3 /lab/cut.py "$pid" "$fd" "$floor" 70)" ||
	bad "sockbufd did not restore the cut within 70 s"
until_true 5 'test "$(metric sockbuf_restores_total comm=\"python3\" found=\"pass\" source=\"daemon\")" != "$before"'
after=$(metric sockbuf_restores_total comm='"python3"' found='"pass"' source='"daemon"')
say "sockbuf_restores_total{comm=\"python3\",found=\"pass\",source=\"daemon\"}: $before -> $after"
check "the restore was the daemon's (its pass)" test "$after" != "$before"

step "events or polling"
cmd journalctl -u sockbufd -b --no-pager -o cat
if journalctl -u sockbufd -b -o cat | grep -q 'events on'; then
	say "mode: events (fexit programs loaded)"
else
	say "mode: polling"
fi
say "sockbuf_event_source_up: $(metric sockbuf_event_source_up)"
if [[ -x /lab/sockbuf_cut_publisher ]]; then
	# Cuts the programs see: a publisher run as nobody, no guard of its
	# own, whose senders the kernel cuts under the guest's lowered tcp_mem.
	mem=$(cat /proc/sys/net/ipv4/tcp_mem)
	echo "96 128 192" >/proc/sys/net/ipv4/tcp_mem
	cmd systemd-run --wait --unit=lab-publisher --uid=nobody --gid=nogroup \
		-p StandardOutput=file:/run/lab/publisher.out /lab/sockbuf_cut_publisher 8 262144 10
	echo "$mem" >/proc/sys/net/ipv4/tcp_mem
	cat /run/lab/publisher.out
	sleep 1.5  # the metrics file is written every second
	grep -E '^sockbuf_(restores_total|below_floor_seconds_(sum|count)|event_records(_lost)?_total|event_wait_seconds_max)' \
		/run/sockbufd/metrics.prom | grep -v python3
	ev=$(metric sockbuf_restores_total found='"event"' source='"daemon"' unit='"lab-publisher.service"')
	say "restores from event records for lab-publisher.service: $ev"
	check "the event programs' records drove restores" awk -v n="$ev" 'BEGIN { exit !(n > 0) }'
fi

step "metrics file (the unit's --metrics-file)"
cmd ls -l /run/sockbufd/
cmd curl -sS file:///run/sockbufd/metrics.prom -o /run/lab/metrics.prom
grep -E '^sockbuf_(guarded_sockets|restores_total|processes|passes_total|event_source_up|tables_read_total|below_floor_seconds_(sum|count))' \
	/run/lab/metrics.prom
check "metrics file names the server's socket" grep -q 'sockbuf_guarded_sockets{.*comm="python3"' /run/lab/metrics.prom

step "metrics endpoint (--metrics-listen 127.0.0.1:9611 in a runtime drop-in)"
mkdir -p /run/systemd/system/sockbufd.service.d
exec_start=$(systemctl show -p ExecStart --value sockbufd | sed -n 's/.*argv\[\]=\([^;]*\);.*/\1/p')
printf '[Service]\nExecStart=\nExecStart=%s --metrics-listen 127.0.0.1:9611\n' "$exec_start" \
	>/run/systemd/system/sockbufd.service.d/lab-listen.conf
cmd cat /run/systemd/system/sockbufd.service.d/lab-listen.conf
systemctl daemon-reload
cmd systemctl restart sockbufd
until_true 10 'curl -sf -o /dev/null http://127.0.0.1:9611/metrics'
cmd curl -sS --max-time 10 http://127.0.0.1:9611/metrics -o /run/lab/endpoint.prom
grep -E '^sockbuf_(guarded_sockets|processes) ' /run/lab/endpoint.prom
check "curl http://127.0.0.1:9611/metrics (IPAddressAllow=localhost)" \
	grep -q '^sockbuf_processes' /run/lab/endpoint.prom
rm -r /run/systemd/system/sockbufd.service.d
systemctl daemon-reload

step "systemd-analyze security sockbufd"
cmd systemd-analyze security sockbufd --no-pager >/run/lab/security.txt
cat /run/lab/security.txt
score=$(sed -n 's/.*Overall exposure level for sockbufd.service: \([0-9.]*\).*/\1/p' /run/lab/security.txt)
say "exposure: $score"
check "exposure 3.0 or better" awk -v s="${score:-99}" 'BEGIN { exit !(s <= 3.0) }'

step "systemctl restart sockbufd (the one with --metrics-listen ends)"
old=$(systemctl show -p MainPID --value sockbufd)
cmd systemctl restart sockbufd
new=$(systemctl show -p MainPID --value sockbufd)
state=$(systemctl is-active sockbufd)
say "MainPID $old -> $new, is-active: $state"
check "restart: active under a new process" test "$state" = active -a "$new" != "$old" -a "$new" != 0
# systemd counts a death by SIGTERM as a clean stop ("Deactivated
# successfully"): the daemon's own last line says it handled the signal.
cmd journalctl -b --no-pager -o cat _PID="$old"
until_true 5 'said_stopped "$old"'
check "restart: sockbufd $old (--metrics-listen) handled SIGTERM and said so" said_stopped "$old"
until_true 10 'test "$(served_by "$pid" "$fd")" = daemon'
expect_served_by daemon "after the restart"
until_true 10 'test "$(metric sockbuf_guarded_sockets comm=\"python3\")" != none'
cmd grep -E '^sockbuf_(guarded_sockets|processes|event_source_up)' /run/sockbufd/metrics.prom

step "systemctl stop sockbufd"
old=$(systemctl show -p MainPID --value sockbufd)
cmd systemctl stop sockbufd
state=$(systemctl is-active sockbufd)
say "systemctl is-active sockbufd: $state"
check "stopped: inactive" test "$state" = inactive
cmd systemctl show sockbufd -p Result -p ExecMainStatus -p ExecMainCode
until_true 5 'said_stopped "$old"'
check "stop: sockbufd $old handled SIGTERM and said so" said_stopped "$old"
until_true 10 'grep -q "sockbufd gone" /run/lab/shim.log'
cmd cat /run/lab/shim.log
check "the shim said its guard serves again" grep -q 'sockbufd gone' /run/lab/shim.log
expect_served_by guard "after the stop"
say "cut from outside: $(timeout 30 python3 /lab/cut.py "$pid" "$fd" "$floor")" ||
	bad "the process's guard did not take back"
cmd ls -la /run/sockbufd 2>&1

step "journalctl -u sockbufd"
cmd journalctl -u sockbufd -b --no-pager
cmd systemctl show lab-server -p ActiveState -p User
echo >&3  # the server reads its line and ends
until_true 10 'test "$(systemctl is-active lab-server)" != active'
cmd journalctl -u lab-server -b --no-pager -o cat

echo
if ((fails == 0)); then echo "RESULT: pass"; else echo "RESULT: fail ($fails checks)"; fi
sync
exec >&- 2>&-
wait $!  # the console's copy has every line before the unit ends
exit 0

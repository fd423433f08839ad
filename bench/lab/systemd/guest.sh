#!/bin/bash
# In the guest (Debian 12, systemd as PID 1), run once by sockbuf-lab.service
# after multi-user.target: sockbufd.service from the installed sockbuf-tools
# package, started, checked, restarted and stopped with systemctl, and
# killed by its watchdog, serving two processes run as nobody by
# systemd-run: one whose guard (10 ms) is tighter than the daemon and keeps
# guarding, one whose guard (1 s) hands its floors over and takes them back.  Every line goes to the serial
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
served() { # served NAME: the server's connection's served_by
	local p="pid_$1" f="fd_$1"
	served_by "${!p}" "${!f}"
}
expect_served_by() { # expect_served_by NAME WANT WHEN
	local p="pid_$1" f="fd_$1" who
	who=$(served "$1")
	say "sockbuf show ${!p} --json: fd ${!f} served_by \"$who\" ($3)"
	check "$1: served_by $2 $3" test "$who" = "$2"
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

step "two servers run as nobody (systemd-run), their floors published by the shim"
mkdir -p /run/lab
# start_server NAME GUARD_MS PORT: sets pid_NAME, fd_NAME and in_NAME.  Held open
# read-write, the fifo's reads block until the lab writes a line, and
# nobody's open of it does not wait for a writer.
start_server() {
	local name=$1 guard=$2 port=$3 p f h
	mkfifo -m 0666 "/run/lab/$name.in"
	exec {h}<>"/run/lab/$name.in"
	printf -v "in_$name" %s "$h"
	install -m 0644 -o nobody -g nogroup /dev/null "/run/lab/$name.shim.log"
	cmd systemd-run --unit="lab-$name" --uid=nobody --gid=nogroup \
		-p StandardOutput=file:"/run/lab/$name.out" -p StandardError=file:"/run/lab/$name.err" \
		/bin/sh -c "exec sockbuf run -q --via preload --policy initial --floor-guard $guard \
--log /run/lab/$name.shim.log -- python3 /lab/py_listener.py 127.0.0.1 $port $bytes </run/lab/$name.in"
	until_true 60 "grep -q listening /run/lab/$name.out"
	cmd timeout 60 python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1', $port)); \
s.sendall(bytes($bytes)); s.close()"
	until_true 60 "grep -q fd= /run/lab/$name.out"
	say "$name: $(sed -n 2p "/run/lab/$name.out")"
	p=$(systemctl show -p MainPID --value "lab-$name")
	f=$(sed -n 's/.*fd=\([0-9]*\).*/\1/p' "/run/lab/$name.out")
	cmd ps -o user,pid,comm,args -p "$p"
	check "$name: runs as nobody" test "$(ps -o user= -p "$p")" = nobody
	check "$name: the shim published the connection's floor" test -n "$f"
	printf -v "pid_$name" %s "$p"
	printf -v "fd_$name" %s "${f:-0}"
}
# The first polls every 10 ms: tighter than the shipped unit (events, a
# full pass every 60 s for setsockopt cuts) and than the lab's drop-in
# below (1 s); it keeps guarding.  The second polls every second: it
# hands over to a daemon whose passes are at least as frequent.
start_server tight 10 5611
start_server loose 1000 5612
expect_served_by tight guard "before sockbufd"
expect_served_by loose guard "before sockbufd"
cut_back() { # cut_back NAME SECONDS WHAT: a cut from outside, back within SECONDS
	local p="pid_$1" f="fd_$1" r
	r=$(timeout 120 python3 /lab/cut.py "${!p}" "${!f}" "$floor" "$2")
	local rc=$?
	say "$1: cut from outside: $r"
	check "$1: the cut is back within $2 s ($3)" test "$rc" = 0
}
cut_back tight 2 "the process's own guard"

step "systemctl start sockbufd (the unit as shipped)"
t0=$(date +%s%N)
cmd systemctl start sockbufd
say "start returned after $((($(date +%s%N) - t0) / 1000000)) ms"
state=$(systemctl is-active sockbufd)
say "systemctl is-active sockbufd: $state"
check "sockbufd active (Type=notify: READY=1 reached)" test "$state" = active
cmd systemctl show sockbufd -p Type -p ActiveState -p SubState -p MainPID -p StatusText \
	-p NRestarts -p Result -p NotifyAccess -p WatchdogUSec -p RuntimeDirectoryPreserve
cmd systemctl status sockbufd --no-pager -l -n 20
until_true 10 'test "$(metric sockbuf_guarded_sockets comm=\"python3\")" != none'
say "sockbuf_guarded_sockets{comm=\"python3\"}: $(metric sockbuf_guarded_sockets comm=\"python3\")"
check "the daemon serves both servers' tables" \
	awk -v n="$(metric sockbuf_guarded_sockets comm=\"python3\")" 'BEGIN { exit !(n >= 4) }'
# Each guard compares what the daemon keeps (its progress file) with its
# own bound: the shipped unit leaves setsockopt cuts to its 60 s pass,
# looser than both guards: neither stands down, and `sockbuf show` says
# who holds each floor and within what.
sleep 2.5  # two of the guards' hand-over checks (one a second)
cmd sockbuf show "$pid_tight"
cmd sockbuf show "$pid_loose"
expect_served_by tight guard "with the shipped unit (60 s for setsockopt cuts)"
expect_served_by loose guard "with the shipped unit (60 s for setsockopt cuts)"
check "tight: sockbuf show says its guard holds it within 10 ms" \
	sh -c "sockbuf show $pid_tight | grep -q 'held by the process.s guard: cuts back within 10 ms'"
check "no guard stood down for a looser daemon" \
	sh -c '! grep -q "serves these floors;" /run/lab/tight.shim.log /run/lab/loose.shim.log'
cut_back tight 2 "its own guard, with the daemon running"

step "PrivateDevices=yes"
main=$(systemctl show -p MainPID --value sockbufd)
say "sockbufd's /dev: $(ls "/proc/$main/root/dev" | tr '\n' ' ')"
check "sockbufd's /dev is private (no vda there)" test ! -e "/proc/$main/root/dev/vda"
check "sockbufd's /dev/shm is the host's" \
	test "$(stat -c %d:%i /dev/shm)" = "$(stat -c %d:%i "/proc/$main/root/dev/shm")"

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
	# The daemon removes a process's series when it exits: its restores
	# are read from the metrics file while it runs (10 s).
	cmd systemd-run --unit=lab-publisher --uid=nobody --gid=nogroup \
		-p StandardOutput=file:/run/lab/publisher.out /lab/sockbuf_cut_publisher 8 262144 10
	ev=none
	for _ in $(seq 60); do
		n=$(metric sockbuf_restores_total found='"event"' source='"daemon"' unit='"lab-publisher.service"')
		[[ $n == none ]] || ev=$n
		systemctl is-active -q lab-publisher || break
		sleep 0.5
	done
	grep -E '^sockbuf_(restores_total|below_floor_seconds_(sum|count)|event_records(_lost)?_total|event_wait_seconds_max)' \
		/run/sockbufd/metrics.prom | grep -v python3
	until_true 30 '! systemctl is-active -q lab-publisher'
	echo "$mem" >/proc/sys/net/ipv4/tcp_mem
	cat /run/lab/publisher.out
	say "restores from event records for lab-publisher.service (its last sample while it ran): $ev"
	check "the event programs' records drove restores" awk -v n="$ev" 'BEGIN { exit !(n + 0 > 0) }'
fi

step "metrics file (the unit's --metrics-file)"
cmd ls -l /run/sockbufd/
cmd curl -sS file:///run/sockbufd/metrics.prom -o /run/lab/metrics.prom
grep -E '^sockbuf_(guarded_sockets|restores_total|processes|passes_total|event_source_up|tables_read_total|below_floor_seconds_(sum|count))' \
	/run/lab/metrics.prom
check "metrics file names the server's socket" grep -q 'sockbuf_guarded_sockets{.*comm="python3"' /run/lab/metrics.prom

step "the hand-over: a daemon as tight as the looser guard (runtime drop-in)"
# --net-interval 1000: the daemon's full pass (setsockopt cuts) every
# second, as tight as the second server's guard and looser than the
# first's; --metrics-listen: the endpoint through IPAddressAllow=localhost.
mkdir -p /run/systemd/system/sockbufd.service.d
exec_start=$(systemctl show -p ExecStart --value sockbufd | sed -n 's/.*argv\[\]=\([^;]*\);.*/\1/p')
printf '[Service]\nExecStart=\nExecStart=%s --net-interval 1000 --metrics-listen 127.0.0.1:9611\n' \
	"$exec_start" >/run/systemd/system/sockbufd.service.d/lab.conf
cmd cat /run/systemd/system/sockbufd.service.d/lab.conf
systemctl daemon-reload
cmd systemctl restart sockbufd
until_true 10 'curl -sf -o /dev/null http://127.0.0.1:9611/metrics'
cmd curl -sS --max-time 10 http://127.0.0.1:9611/metrics -o /run/lab/endpoint.prom
grep -E '^sockbuf_(guarded_sockets|processes) ' /run/lab/endpoint.prom
check "curl http://127.0.0.1:9611/metrics (IPAddressAllow=localhost)" \
	grep -q '^sockbuf_processes' /run/lab/endpoint.prom
until_true 10 'grep -q "serves these floors;" /run/lab/loose.shim.log'
cmd cat /run/lab/loose.shim.log
check "loose: the shim said sockbufd serves its floors" \
	grep -q 'sockbufd (pid [0-9]*) serves these floors' /run/lab/loose.shim.log
expect_served_by loose daemon "with a daemon passing every second"
expect_served_by tight guard "with a daemon passing every second"
cmd sockbuf show "$pid_loose"
before=$(metric sockbuf_restores_total comm='"python3"' found='"pass"' source='"daemon"')
cut_back loose 5 "the daemon's pass, every second"
until_true 5 'test "$(metric sockbuf_restores_total comm=\"python3\" found=\"pass\" source=\"daemon\")" != "$before"'
after=$(metric sockbuf_restores_total comm='"python3"' found='"pass"' source='"daemon"')
say "sockbuf_restores_total{comm=\"python3\",found=\"pass\",source=\"daemon\"}: $before -> $after"
check "loose: the restore was the daemon's (its pass)" test "$after" != "$before"

step "watchdog: sockbufd stopped with SIGSTOP (WatchdogSec=10s)"
old=$(systemctl show -p MainPID --value sockbufd)
restarts=$(systemctl show -p NRestarts --value sockbufd)
journal_ino=$(stat -c %i /run/sockbufd/restoring 2>/dev/null || echo none)
say "MainPID $old, NRestarts $restarts, /run/sockbufd/restoring inode $journal_ino"
t0=$(date +%s%N)
kill -STOP "$old"
until_true 10 'grep -q "made no progress" /run/lab/loose.shim.log'
say "loose: its guard resumed $((($(date +%s%N) - t0) / 1000000)) ms after the SIGSTOP"
check "loose: the guard said the daemon made no progress" \
	grep -q 'sockbufd made no progress' /run/lab/loose.shim.log
expect_served_by loose guard "while the daemon is stopped"
cut_back loose 5 "its own guard, the daemon stopped"
until_true 40 'test "$(systemctl show -p MainPID --value sockbufd)" != "$old" -a \
	"$(systemctl is-active sockbufd)" = active'
new=$(systemctl show -p MainPID --value sockbufd)
say "MainPID $old -> $new, $((($(date +%s%N) - t0) / 1000000)) ms after the SIGSTOP"
cmd systemctl show sockbufd -p NRestarts -p Result -p ActiveState
cmd journalctl -u sockbufd -b --no-pager -o cat -n 12
check "watchdog: systemd restarted sockbufd" \
	test "$(systemctl show -p NRestarts --value sockbufd)" = "$((restarts + 1))" -a "$new" != "$old"
check "watchdog: the journal says so" \
	sh -c "journalctl -u sockbufd -b -o cat | grep -q 'Watchdog timeout'"
# RuntimeDirectoryPreserve=restart: the restore journal (a restore cut
# short by the kill) is the one the new daemon reads at its start.
check "watchdog: /run/sockbufd/restoring kept over the restart (inode $journal_ino)" \
	test "$(stat -c %i /run/sockbufd/restoring 2>/dev/null || echo gone)" = "$journal_ino"
until_true 10 'test "$(grep -c "serves these floors;" /run/lab/loose.shim.log)" -ge 2'
cmd cat /run/lab/loose.shim.log
expect_served_by loose daemon "after the watchdog's restart"

step "systemd-analyze security sockbufd"
cmd systemd-analyze security sockbufd --no-pager >/run/lab/security.txt
cat /run/lab/security.txt
score=$(sed -n 's/.*Overall exposure level for sockbufd.service: \([0-9.]*\).*/\1/p' /run/lab/security.txt)
say "exposure: $score"
check "exposure 3.0 or better" awk -v s="${score:-99}" 'BEGIN { exit !(s <= 3.0) }'

step "systemctl restart sockbufd (the drop-in's, with --metrics-listen)"
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
until_true 10 'test "$(served loose)" = daemon'
expect_served_by loose daemon "after the restart"
expect_served_by tight guard "after the restart"
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
until_true 10 'grep -q "sockbufd gone" /run/lab/loose.shim.log'
cmd cat /run/lab/loose.shim.log
check "loose: the shim said its guard serves again" grep -q 'sockbufd gone' /run/lab/loose.shim.log
expect_served_by loose guard "after the stop"
expect_served_by tight guard "after the stop"
cut_back loose 5 "its own guard, after the stop"
cut_back tight 2 "its own guard, after the stop"
cmd ls -la /run/sockbufd 2>&1
rm -r /run/systemd/system/sockbufd.service.d
systemctl daemon-reload

step "journalctl -u sockbufd"
cmd journalctl -u sockbufd -b --no-pager
cmd systemctl show lab-tight lab-loose -p ActiveState -p User
echo >&"$in_tight"  # the servers read their line and end
echo >&"$in_loose"
until_true 10 'test "$(systemctl is-active lab-tight)" != active -a "$(systemctl is-active lab-loose)" != active'
cmd journalctl -u lab-tight -u lab-loose -b --no-pager -o cat

echo
if ((fails == 0)); then echo "RESULT: pass"; else echo "RESULT: fail ($fails checks)"; fi
sync
exec >&- 2>&-
wait $!  # the console's copy has every line before the unit ends
exit 0

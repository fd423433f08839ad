#!/bin/sh
# /init of a sockbuf kernel-matrix guest (busybox sh).
#
# Everything this guest learns goes to the serial console between marker
# lines that tests/kernels/run-matrix parses:
#   @@SBK STEP <name>@@                      a stage starts (progress)
#   @@SBK-BEGIN <name>@@ ... @@SBK-END <name> rc=<n>@@   one JSON document
#   @@SBK DONE@@                             the guest finished its plan
# Parameters arrive as environment variables from the kernel command line
# (sbk_profile, sbk_rtts, sbk_seconds, sbk_bytes, sbk_pressure_rtt,
# sbk_memcg_headroom, sbk_force_size).  The guest has no network card: all
# traffic stays on a veth pair between two namespaces, addresses from
# 198.18.0.0/15.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
# busybox's ash runs its own applets before PATH, and its ip has no netns
# and its tc no netem: iproute2's by full path.
ip() { /usr/sbin/ip "$@"; }
tc() { /usr/sbin/tc "$@"; }
mount -t proc proc /proc
mount -t sysfs sys /sys
# tracefs, for the contract suite's kernel-event recorder (--trace).
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
# The contract's daemon mode mounts a private tmpfs there.
mkdir -p /dev/shm
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /run/netns /var
ln -s /run /var/run
# Keep kernel messages off the console: they would split JSON lines.
dmesg -n 1

: "${sbk_profile:=quick}" "${sbk_rtts:=50}" "${sbk_seconds:=4}"
: "${sbk_bytes:=268435456}" "${sbk_pressure_rtt:=50}" "${sbk_memcg_headroom:=65536}"
: "${sbk_force_size:=16777216}" "${sbk_check_limit:=120}"

step() {
	step_name=$1
	echo "@@SBK STEP $1@@"
}
# emit NAME FILE RC: one JSON document between markers.
emit() {
	echo "@@SBK-BEGIN $1@@"
	if [ -s "$2" ]; then cat "$2"; else echo '{}'; fi
	echo
	echo "@@SBK-END $1 rc=$3@@"
}
jstr() { printf '"%s"' "$(printf '%s' "$1" | tr '\n\t' '  ' | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

step modules
mods=""
if [ -f /modules/order ]; then
	while read -r m; do
		name=${m%.ko}
		name=${name#*-}
		if insmod "/modules/$m" 2>/tmp/insmod.err; then r=ok; else r="fail: $(cat /tmp/insmod.err)"; fi
		mods="$mods${mods:+,}$(jstr "$name"):$(jstr "$r")"
	done </modules/order
fi

step facts
cg=""
if mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null; then
	cg=$(cat /sys/fs/cgroup/cgroup.controllers)
fi
netem=no
ip link add sbk-t0 type veth peer name sbk-t1 2>/dev/null &&
	tc qdisc add dev sbk-t0 root netem delay 1ms 2>/dev/null && netem=yes
ip link del sbk-t0 2>/dev/null
{
	echo "{"
	echo "\"release\": $(jstr "$(uname -r)"),"
	echo "\"version\": $(jstr "$(cat /proc/version)"),"
	echo "\"profile\": $(jstr "$sbk_profile"),"
	echo "\"modules\": {${mods}},"
	echo "\"cgroup2_controllers\": $(jstr "$cg"),"
	echo "\"netem\": $(jstr "$netem"),"
	echo "\"tcp_mem\": $(jstr "$(cat /proc/sys/net/ipv4/tcp_mem)"),"
	echo "\"tcp_rmem\": $(jstr "$(cat /proc/sys/net/ipv4/tcp_rmem)"),"
	echo "\"tcp_wmem\": $(jstr "$(cat /proc/sys/net/ipv4/tcp_wmem)"),"
	echo "\"congestion_control\": $(jstr "$(cat /proc/sys/net/ipv4/tcp_congestion_control)"),"
	echo "\"mem_total_kb\": $(awk '/MemTotal/ {print $2}' /proc/meminfo),"
	echo "\"cpus\": $(nproc)"
	echo "}"
} >/tmp/facts.json
emit facts /tmp/facts.json 0

step probe
sockbuf probe --json >/tmp/probe.json 2>/tmp/probe.err
emit probe /tmp/probe.json $?

step network
ip netns add sbk-a && ip netns add sbk-b &&
	ip link add sbk-va type veth peer name sbk-vb &&
	ip link set sbk-va netns sbk-a && ip link set sbk-vb netns sbk-b &&
	ip -n sbk-a addr add 198.18.0.1/24 dev sbk-va &&
	ip -n sbk-b addr add 198.18.0.2/24 dev sbk-vb &&
	ip -n sbk-a link set lo up && ip -n sbk-b link set lo up &&
	ip -n sbk-a link set sbk-va up && ip -n sbk-b link set sbk-vb up
net_rc=$?

# set_delay RTT_MS: half the round trip on each side's egress.
set_delay() {
	half_us=$(($1 * 500))
	for s in a b; do
		tc -n sbk-$s qdisc del dev sbk-v$s root 2>/dev/null
		[ "$1" -gt 0 ] || continue
		tc -n sbk-$s qdisc add dev sbk-v$s root netem delay ${half_us}us limit 100000 || return 1
	done
	ip -n sbk-a tcp_metrics flush 2>/dev/null
	ip -n sbk-b tcp_metrics flush 2>/dev/null
	return 0
}

# descendants PID: the processes PID started, and theirs.
descendants() {
	for d in /proc/[0-9]*; do
		{ read -r _ _ _ ppid _ <"$d/stat"; } 2>/dev/null || continue
		[ "$ppid" = "$1" ] || continue
		echo "${d#/proc/}"
		descendants "${d#/proc/}"
	done
}
# task_report PID...: each task's state, wait channel and kernel stack.
task_report() {
	for p in "$@"; do
		for t in /proc/"$p"/task/*; do
			echo "task ${t##*/} of $p ($(cat "/proc/$p/comm" 2>/dev/null))" \
				"$(grep '^State:' "$t/status" 2>/dev/null) wchan $(cat "$t/wchan" 2>/dev/null)"
			sed 's/^/    /' "$t/stack" 2>/dev/null
		done
	done
}
# bounded NAME CMD...: CMD under the step limit (sbk_check_limit seconds).
# Past it, what CMD and every process it started were waiting in goes to
# /tmp/NAME.stuck and all of them are killed: a stuck step fails with its
# evidence (emit_step) and the guest goes on with its plan.
bounded() {
	name=$1
	shift
	rm -f "/tmp/$name.stuck"
	"$@" &
	pid=$!
	(
		i=0
		while [ $i -lt "$sbk_check_limit" ]; do
			kill -0 $pid 2>/dev/null || exit 0
			sleep 1
			i=$((i + 1))
		done
		kill -0 $pid 2>/dev/null || exit 0
		all="$pid $(descendants $pid)"
		# shellcheck disable=SC2086 # one word per pid
		task_report $all >"/tmp/$name.stuck.part"
		mv "/tmp/$name.stuck.part" "/tmp/$name.stuck"
		# shellcheck disable=SC2086
		kill -9 $all 2>/dev/null
	) &
	wd=$!
	wait $pid
	rc=$?
	kill $wd 2>/dev/null
	wait $wd 2>/dev/null
	return $rc
}
# emit_step NAME FILE RC: emit, or for a step bounded() stopped, the
# reason and the stacks (on the console as they are, in the JSON joined).
emit_step() {
	if [ -s "/tmp/$1.stuck" ]; then
		echo "step $1 did not finish within $sbk_check_limit s; its tasks:"
		cat "/tmp/$1.stuck"
		echo "{\"error\": \"did not finish within $sbk_check_limit s (step limit): killed\"," \
			"\"stuck\": $(jstr "$(head -c 8000 "/tmp/$1.stuck")")}" >"$2"
		emit "$1" "$2" 124
	else
		emit "$1" "$2" "$3"
	fi
}

check() {
	bounded "$step_name" sockbuf-kernel-check --server-ns /run/netns/sbk-a \
		--client-ns /run/netns/sbk-b --addr 198.18.0.1 --seconds "$sbk_seconds" \
		--bytes "$sbk_bytes" "$@"
}

if [ $net_rc -eq 0 ]; then
	for rtt in $(echo "$sbk_rtts" | tr ',' ' '); do
		step "check-rtt$rtt"
		if set_delay "$rtt"; then
			check --rtt-ms "$rtt" --scenarios untouched,initial,locked \
				--json /tmp/check.json
			emit_step "check-rtt$rtt" /tmp/check.json $?
		else
			echo "{\"skip\": \"netem delay $rtt ms could not be set\"}" >/tmp/check.json
			emit "check-rtt$rtt" /tmp/check.json 77
		fi
	done

	step pressure-tcp_mem
	set_delay "$sbk_pressure_rtt"
	check --rtt-ms "$sbk_pressure_rtt" --scenarios tcp_mem,tcp_mem_restore \
		--allow-global-changes --json /tmp/pressure.json
	emit_step pressure-tcp_mem /tmp/pressure.json $?

	# A size above net.core.[wr]mem_max and tcp_[wr]mem[2] (16 MB by
	# default): FORCE stored, SO_BUF_LOCK 0 keeps it, a transfer keeps it;
	# which sysctls a new network namespace owns (the guest may write them).
	step force-ceiling
	set_delay "$sbk_pressure_rtt"
	check --rtt-ms "$sbk_pressure_rtt" --scenarios initial_force --size "$sbk_force_size" \
		--allow-global-changes --json /tmp/force.json
	emit_step force-ceiling /tmp/force.json $?

	step pressure-memcg
	case " $cg " in
	*" memory "*)
		# Only the sending process of each run joins a group of its own
		# (sockbuf-kernel-check makes it under this root and records
		# memory.stat sock and memory.events per run): the check itself
		# stays outside any limit.
		echo +memory >/sys/fs/cgroup/cgroup.subtree_control
		check --rtt-ms "$sbk_pressure_rtt" --scenarios memcg \
			--memcg-parent /sys/fs/cgroup --memcg-headroom "$sbk_memcg_headroom" \
			--allow-global-changes --json /tmp/memcg.json
		emit_step pressure-memcg /tmp/memcg.json $?
		;;
	*)
		echo '{"skip": "no cgroup v2 memory controller"}' >/tmp/memcg.json
		emit pressure-memcg /tmp/memcg.json 77
		;;
	esac
	set_delay 0
else
	echo '{"error": "veth pair between namespaces could not be set up"}' >/tmp/net.json
	emit network /tmp/net.json 1
fi

# The project's contract suite, when the image carries it.  C3's bounds
# allow a guard's pass what a pass costs in these guests (qemu TCG, no
# KVM: 2-socket passes up to 6-44 ms in the 7.x run, against under 5 ms
# on the host), fixed before the run (docs/contract.md, "Bounds known in
# advance").
: "${sbk_pass_cost:=50000,1000}"
if command -v sockbuf-contract >/dev/null; then
	step contract
	contract_args="--pass-cost $sbk_pass_cost"
	[ "$sbk_profile" = quick ] && contract_args="$contract_args --quick"
	# In a memory cgroup of its own (no limit) where the kernel has the
	# controller: SO_RESERVE_MEM works only for sockets charged to a
	# non-root memcg, so the reserve arm's promise is judged only there.
	contract_cg=""
	case " $cg " in
	*" memory "*)
		echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		mkdir -p /sys/fs/cgroup/sbk-contract 2>/dev/null &&
			contract_cg=/sys/fs/cgroup/sbk-contract
		;;
	esac
	# shellcheck disable=SC2086,SC2016 # word splitting of the flags is wanted
	sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec sockbuf-contract "$@"' \
		sh "$contract_cg" $contract_args --allow-global-changes --json /tmp/contract.json
	emit contract /tmp/contract.json $?
fi

# A dip made on purpose (pressure: tcp_mem lowered under the memory in
# use), recorded through tracefs: run-matrix checks that a kernel event
# recorded before the first C3 violation names it (kmatrix/outcome.py).
if command -v sockbuf-contract >/dev/null; then
	step trace-dip
	sockbuf-contract --quick --scenario pressure --clause C3 --allow-global-changes \
		--pass-cost "$sbk_pass_cost" --trace on --json /tmp/trace-dip.json >/tmp/trace-dip.log 2>&1
	rc=$?
	if [ ! -s /tmp/trace-dip.json ]; then
		echo "{\"skip\": $(jstr "$(tail -n 3 /tmp/trace-dip.log)")}" >/tmp/trace-dip.json
	fi
	emit trace-dip /tmp/trace-dip.json $rc
fi

# The floor guard's BPF and event tests (the BPF pass, the event source
# on the cutting functions and the socket-option write, reserve mode's
# guard, an events guard's hand-over to a daemon), when the image carries
# the unit tests: on this kernel, as root, with BTF where the kernel has
# it.  sbk_unit_filter widens them.
: "${sbk_unit_filter:=GuardEvents*:GuardBpf*:GuardReserve*:*GuardHandoverUnpublished*}"
# They talk over loopback in the initial namespace: bring its lo up (the
# checks above use lo only inside sbk-a and sbk-b).
ip link set lo up 2>/dev/null
# gtest_run NAME SECS PROG ARGS...: PROG with a time limit; its JSON, or on
# a time-out the test it was in and the log's tail.
gtest_run() {
	name=$1 secs=$2
	shift 2
	json=/tmp/$name.json log=/tmp/$name.log
	timeout "$secs" "$@" --gtest_output=json:"$json" >"$log" 2>&1
	rc=$?
	if [ ! -s "$json" ]; then
		last=$(grep '^\[ RUN' "$log" | tail -n 1)
		echo "{\"timeout_s\": $secs, \"rc\": $rc, \"running\": $(jstr "$last")," \
			"\"log_tail\": $(jstr "$(tail -n 20 "$log")")}" >"$json"
	fi
	emit "$name" "$json" "$rc"
}
if command -v sockbuf_unit_tests >/dev/null; then
	step unit
	gtest_run unit 240 sockbuf_unit_tests --gtest_filter="$sbk_unit_filter"
fi
if command -v sockbuf_kernel_check_kevents_tests >/dev/null; then
	step kevents
	gtest_run kevents 120 sockbuf_kernel_check_kevents_tests
fi

echo "@@SBK DONE@@"
sync
poweroff -f

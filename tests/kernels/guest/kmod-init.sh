#!/bin/sh
# /init of a kmod guest (tests/kernels/run-matrix --kmod): loads
# kmod-proposal's module, whose in-kernel self-test runs over loopback at
# load, reports its verdict, and runs the series' kselftest when the image
# carries it.  Same console markers as init.sh:
#   @@SBK STEP <name>@@, @@SBK-BEGIN <name>@@ ... @@SBK-END <name> rc=<n>@@,
#   @@SBK DONE@@.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
# devtmpfs has no /dev/stdout; the kselftest runner writes its log there.
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
dmesg -n 1
# The module's sockets use 127.0.0.1 in the initial namespace.
/usr/sbin/ip link set lo up
# tcp_reserved_sndbuf needs cgroup v2 with the memory controller enabled
# for the children of its cgroup (it makes a group of its own under it and
# never writes cgroup.subtree_control itself): the guest enables it in the
# root, as systemd does on a host. Without it the test reports a skip.
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null &&
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null

step() { echo "@@SBK STEP $1@@"; }
emit() {
	echo "@@SBK-BEGIN $1@@"
	if [ -s "$2" ]; then cat "$2"; else echo '{}'; fi
	echo
	echo "@@SBK-END $1 rc=$3@@"
}
jstr() { printf '"%s"' "$(printf '%s' "$1" | tr '\n\t' '  ' | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
# jlines FILE: the file's lines as a JSON array of strings.
jlines() {
	printf '['
	sep=""
	while IFS= read -r line; do
		printf '%s%s' "$sep" "$(jstr "$line")"
		sep=", "
	done <"$1"
	printf ']'
}

step facts
{
	echo "{\"release\": $(jstr "$(uname -r)"),"
	echo "\"version\": $(jstr "$(cat /proc/version)")}"
} >/tmp/facts.json
emit facts /tmp/facts.json 0

# The Debian kernels' sch_netem (and what it needs) first: sndbuf_hold's
# delay.  The project's module is the one named sockbuf_kmod.
if [ -f /modules/order ]; then
	while read -r m; do
		case $m in *sockbuf_kmod*) ;; *) insmod "/modules/$m" 2>/dev/null ;; esac
	done </modules/order
fi
m=$(grep sockbuf_kmod /modules/order 2>/dev/null | tail -n 1)
if [ -n "$m" ]; then
	step kmod
	rc=0
	if insmod "/modules/$m" 2>/tmp/insmod.err; then
		verdict=$(cat /sys/module/sockbuf_kmod/parameters/selftest)
		case "$verdict" in pass*) ;; *) rc=1 ;; esac
		rmmod sockbuf_kmod 2>/tmp/rmmod.err && unload=ok || unload="fail: $(cat /tmp/rmmod.err)"
		echo "{\"insmod\": \"ok\", \"selftest\": $(jstr "$verdict"), \"rmmod\": $(jstr "$unload")}" >/tmp/kmod.json
	else
		rc=1
		echo "{\"insmod\": $(jstr "fail: $(cat /tmp/insmod.err)")}" >/tmp/kmod.json
	fi
	emit kmod /tmp/kmod.json $rc
fi

# The series' selftests, installed the kselftest way (run_kselftest.sh
# and its runner; busybox sh runs them): the net fix's and the net-next
# series'. KTAP lines go into the JSON, one section per test.
if [ -x /kselftest/run_kselftest.sh ]; then
	for kst in tcp_reserved_sndbuf tcp_sndbuf_expand; do
		[ -x /kselftest/net/$kst ] || continue
		step kselftest-$kst
		# Appending: the runner opens /dev/stdout again (O_APPEND) for
		# the test's own lines; a plain > would let the two overwrite
		# each other.
		: >/tmp/ktap.txt
		(cd /kselftest && ./run_kselftest.sh -t net:$kst) >>/tmp/ktap.txt 2>&1
		rc=1
		grep -q "^ok 1 selftests: net: $kst" /tmp/ktap.txt && rc=0
		echo "{\"test\": \"net:$kst\", \"ktap\": $(jlines /tmp/ktap.txt)}" >/tmp/ktap.json
		emit kselftest-$kst /tmp/ktap.json $rc
	done
fi

# kmod-proposal/kernel/sndbuf_hold.c (build.sh puts it beside the
# kselftest): a forced, unlocked 16 MB send buffer over loopback delayed
# by netem, one JSON line per RTT.
if [ -x /kselftest/sockbuf/sndbuf_hold ]; then
	step sndbuf-hold
	rc=0
	{
		printf '{"runs": ['
		sep=""
		for rtt in 50 120 250; do
			line=$(/kselftest/sockbuf/sndbuf_hold $rtt 10 2>/dev/null | tail -n 1) || rc=1
			printf '%s%s' "$sep" "$line"
			sep=", "
		done
		printf ']}'
	} >/tmp/hold.json
	emit sndbuf-hold /tmp/hold.json $rc
fi

echo "@@SBK DONE@@"
sync
poweroff -f

#!/bin/sh
# /init of a kmod guest (tests/kernels/run-matrix --kmod): loads
# kmod-proposal's module, whose in-kernel self-test runs over loopback at
# load, reports its verdict, and runs the series' kselftest program when
# the image carries it.  Same console markers as init.sh:
#   @@SBK STEP <name>@@, @@SBK-BEGIN <name>@@ ... @@SBK-END <name> rc=<n>@@,
#   @@SBK DONE@@.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
dmesg -n 1
# The module's sockets use 127.0.0.1 in the initial namespace.
/usr/sbin/ip link set lo up

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

if [ -f /modules/order ] && [ -s /modules/order ]; then
	step kmod
	m=$(tail -n 1 /modules/order)
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

if command -v so_buf_floor >/dev/null; then
	step kselftest
	so_buf_floor >/tmp/ktap.txt 2>&1
	rc=$?
	echo "{\"program\": \"so_buf_floor\", \"exit\": $rc, \"ktap\": $(jlines /tmp/ktap.txt)}" >/tmp/ktap.json
	emit kselftest-so_buf_floor /tmp/ktap.json $rc
fi

echo "@@SBK DONE@@"
sync
poweroff -f

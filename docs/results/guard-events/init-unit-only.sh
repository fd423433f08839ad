#!/bin/sh
# /init: the floor guard's BPF and event unit tests and the check's
# kernel-event tests alone (tests/kernels/guest/init.sh's last two steps,
# lo up), for kernels whose matrix run had lo down.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
dmesg -n 1
/usr/sbin/ip link set lo up
emit() {
	echo "@@SBK-BEGIN $1@@"
	if [ -s "$2" ]; then cat "$2"; else echo '{}'; fi
	echo
	echo "@@SBK-END $1 rc=$3@@"
}
echo "@@SBK STEP unit@@"
timeout 240 sockbuf_unit_tests --gtest_filter='GuardEvents*:GuardBpf*:GuardReserve*' \
	--gtest_output=json:/tmp/unit.json >/tmp/unit.log 2>&1
rc=$?
cat /tmp/unit.log
emit unit /tmp/unit.json $rc
echo "@@SBK STEP kevents@@"
timeout 120 sockbuf_kernel_check_kevents_tests --gtest_output=json:/tmp/kevents.json >/tmp/kevents.log 2>&1
rc=$?
cat /tmp/kevents.log
emit kevents /tmp/kevents.json $rc
echo "@@SBK DONE@@"
sync
poweroff -f

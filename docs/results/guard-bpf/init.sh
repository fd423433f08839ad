#!/bin/sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
dmesg -n 1
/usr/sbin/ip link set lo up 2>/dev/null || ip link set lo up
echo "@@ kernel $(uname -r)"
ls /sys/kernel/btf/vmlinux && echo "@@ btf present"
/opt/sockbuf_unit_tests --gtest_filter='GuardBpf.*:Sources/Guard.*bpf:Cxx.GuardFlags*' 2>&1
echo "@@ rc $?"
poweroff -f

#!/bin/sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
echo "+memory" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
dmesg -n 1
/usr/sbin/ip link set lo up 2>/dev/null || ip link set lo up
echo "@@ kernel $(uname -r)"
ls /sys/kernel/btf/vmlinux && echo "@@ btf present"
[ -x /usr/bin/sockbuf ] && /usr/bin/sockbuf probe 2>&1 | tail -1
/usr/bin/sockbuf_unit_tests --gtest_filter="${filter:-GuardEvents*}" 2>&1
echo "@@ rc $?"
if [ -x /usr/bin/sockbuf_guard_events_cost ]; then
  /usr/bin/sockbuf_guard_events_cost ${cost_flags} ${cost_secs:-2} ${cost_rounds:-5} ${cost_n:-10000} 2>&1
  echo "@@ cost rc $?"
fi
poweroff -f

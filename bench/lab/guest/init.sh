#!/bin/sh
# /init of a lab guest (bench/lab/guest/run.py): mounts, lo up, a memory
# controller, then the lab's /usr/bin/lab.sh with the kernel command
# line's lab_* variables in its environment; its rc and a poweroff.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
echo "+memory" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
dmesg -n 1
if [ -f /modules/order ]; then
	while read -r m; do
		insmod "/modules/$m" 2>/dev/null || echo "@@ insmod $m failed"
	done </modules/order
fi
/usr/sbin/ip link set lo up
echo "@@ kernel $(uname -r), $(nproc) CPUs"
[ -e /sys/kernel/btf/vmlinux ] && echo "@@ btf present"
/bin/sh /usr/bin/lab.sh
echo "@@ lab rc $?"
poweroff -f

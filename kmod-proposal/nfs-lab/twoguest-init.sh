#!/bin/busybox sh
# shellcheck shell=dash
# /init of the two-guest NFS lab (twoguest.sh): one qemu guest per role,
# each with its own kernel, joined by a qemu stream backend (virtio-net,
# eth0). role=server: the kernel's NFS server (NFSv4.2 over TCP,
# lab_threads threads) exporting a tmpfs at 198.18.0.1. role=client: at
# 198.18.0.2, netem on its eth0 egress delays every packet by the RTT
# (the whole round trip on one side, limit 200000 packets, so that
# neither the data of a write nor the ACKs of a read are dropped at the
# delay); per RTT a fresh mount, fio's O_DIRECT write then read of
# lab_mib MiB in lab_bs_mib MiB requests, the server sockets' sizes
# read from the server over the control port, umount. One line per
# transfer:
#   @@ nfs2 arm=A rtt=R op=write|read rc=N bytes=B secs=S MBps=M
# Variables (kernel command line): role, lab_arm, lab_rtts (0,50,120,250),
# lab_mib (1024), lab_bs_mib (256), lab_threads (8), lab_nconnect (1).
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mkdir -p /run /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs /export /mnt/nfs
dmesg -n 1
# A distribution kernel's modules (twoguest.sh --modules), in order.
[ -e /modules.load ] && while read -r m; do insmod "$m"; done </modules.load
arm=${lab_arm:-unknown}
mib=${lab_mib:-1024}
bs=${lab_bs_mib:-256}
echo "@@ role=${role:-?} arm=$arm kernel=$(uname -r) mem=$(awk '/MemTotal/ {print $2}' /proc/meminfo)kB"
ip link set lo up
ip link set eth0 up

# What the NFS programs look up, on both roles.
cat >/etc/netconfig <<'NC'
tcp        tpi_cots_ord  v     inet     tcp     -       -
udp        tpi_clts      v     inet     udp     -       -
NC
printf 'ip\t0\tIP\ntcp\t6\tTCP\nudp\t17\tUDP\n' >/etc/protocols
printf 'nfs\t2049/tcp\n' >/etc/services
echo "root:x:0:0::/:/bin/sh" >/etc/passwd
echo "nobody:x:65534:65534::/:/bin/sh" >>/etc/passwd
echo "nogroup:x:65534:" >/etc/group

server() {
	ip addr add 198.18.0.1/24 dev eth0
	echo "/export 198.18.0.2(rw,no_root_squash,insecure,no_subtree_check,fsid=1)" >/etc/exports
	: >/var/lib/nfs/etab
	: >/var/lib/nfs/rmtab
	ln -sf /proc/mounts /etc/mtab
	mount -t tmpfs -o size=$((mib + 256))m export /export
	mount -t nfsd nfsd /proc/fs/nfsd || { echo "@@ nfs2: no nfsd"; poweroff -f; }
	echo 10 >/proc/fs/nfsd/nfsv4gracetime
	echo 10 >/proc/fs/nfsd/nfsv4leasetime
	exportfs -ra
	rpc.mountd -N 2 -N 3 --no-udp
	rpc.nfsd -N 3 --no-udp ${lab_threads:-8}
	echo "@@ nfsd threads=$(cat /proc/fs/nfsd/threads) max_block_size=$(cat /proc/fs/nfsd/max_block_size)" \
		"tcp_wmem=\"$(cat /proc/sys/net/ipv4/tcp_wmem)\" tcp_rmem=\"$(cat /proc/sys/net/ipv4/tcp_rmem)\""
	# Control port 7000: "skmem" answers with the NFS sockets' largest
	# send buffer and queued send memory, receive buffer and queued
	# receive memory since the last "reset"; "off" powers the guest off.
	: >/tmp/reply
	(while sleep 0.25; do ss -tmnH state established '( sport = :2049 )' >>/tmp/skmem 2>/dev/null; done) &
	while :; do
		cmd=$(nc -l -p 7000 -w 5 </tmp/reply 2>/dev/null | head -1) || sleep 1
		case $cmd in
		reset) : >/tmp/skmem; : >/tmp/reply ;;
		skmem) awk '/skmem:/ { s = $0; sub(/.*skmem:\(/, "", s); sub(/\).*/, "", s); n = split(s, f, ",")
				for (i = 1; i <= n; i++) { k = f[i]; gsub(/[0-9]/, "", k); v = f[i]; gsub(/[^0-9]/, "", v)
					if (v + 0 > m[k]) m[k] = v + 0 } }
			END { printf "tb=%d w=%d rb=%d r=%d\n", m["tb"], m["w"], m["rb"], m["r"] }' /tmp/skmem >/tmp/reply ;;
		off) poweroff -f ;;
		esac
	done
}

ask() { # command: the server's answer (sent on the next connection)
	echo "$1" | nc -w 2 198.18.0.1 7000 >/dev/null 2>&1
	# The server listens again once it has acted on the command.
	for i in 1 2 3 4 5; do
		sleep 1
		a=$(echo x | nc -w 2 198.18.0.1 7000 2>/dev/null | head -1) && [ -n "$a$2" ] && break
	done
	echo "$a"
}

client() {
	ip addr add 198.18.0.2/24 dev eth0
	# The client is never the limit: 32 MiB ceilings both ways.
	echo "4096 16384 33554432" >/proc/sys/net/ipv4/tcp_wmem
	echo "4096 131072 33554432" >/proc/sys/net/ipv4/tcp_rmem
	i=0
	until ping -c 1 -W 1 198.18.0.1 >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -gt 120 ] && { echo "@@ nfs2: no server"; poweroff -f; }
	done
	sleep 15 # NFSv4 grace period of the server (10 s)
	# iproute2's tc by its path: busybox --install put its own tc, which
	# knows no netem, first in PATH.
	for rtt in $(echo "${lab_rtts:-0,50,120,250}" | tr , ' '); do
		/usr/sbin/tc qdisc del dev eth0 root 2>/dev/null
		[ "$rtt" -gt 0 ] && { /usr/sbin/tc qdisc add dev eth0 root netem delay ${rtt}ms limit 200000 ||
			echo "@@ nfs2: netem refused"; }
		echo "@@ path rtt=$rtt ping_avg_ms=$(ping -c 3 -q 198.18.0.1 | awk -F/ '/avg/ { print $4 }')"
		# A fresh mount per RTT: no connection carries state across.
		mount.nfs4 198.18.0.1:/export /mnt/nfs \
			-o vers=4.2,proto=tcp,rsize=1048576,wsize=1048576,nconnect=${lab_nconnect:-1} ||
			{ echo "@@ nfs2: mount failed"; continue; }
		for op in write read; do
			ask reset quiet >/dev/null
			fio --name=$op --filename=/mnt/nfs/f --rw=$op --bs=${bs}m --size=${mib}m \
				--direct=1 --ioengine=psync --numjobs=1 --thread --output-format=terse \
				--terse-version=3 >/tmp/fio.txt 2>/tmp/fio.err
			rc=$?
			# terse v3: field 6 read KiB, 9 read runtime ms; 47 and 50
			# the same for writes.
			if [ $op = read ]; then f=6; else f=47; fi
			# shellcheck disable=SC2046 # three numbers, split on purpose
			set -- $(awk -F';' -v f=$f '{ printf "%d %.3f %.1f", $f * 1024, $(f + 3) / 1000, ($(f + 3) > 0 ? $f * 1024 / ($(f + 3) / 1000) / 1e6 : 0) }' /tmp/fio.txt)
			echo "@@ nfs2 arm=$arm rtt=$rtt op=$op rc=$rc bytes=${1:-0} secs=${2:-0} MBps=${3:-0} $(ask skmem)"
			[ $rc -eq 0 ] || echo "@@ nfs2: fio: $(tail -2 /tmp/fio.err | tr '\n' ' ')"
		done
		umount /mnt/nfs
	done
	/usr/sbin/tc qdisc del dev eth0 root 2>/dev/null
	ask off quiet >/dev/null
	echo "@@ done"
	poweroff -f
}

case ${role:-} in
server) server ;;
client) client ;;
*) echo "@@ nfs2: role= server or client"; poweroff -f ;;
esac

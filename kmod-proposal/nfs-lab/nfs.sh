#!/bin/sh
# Lab script for bench/lab/guest/run.py (run by nfs-lab/run.sh): the
# kernel's NFS server (NFSv4.2 over TCP, exporting a tmpfs) in namespace a
# (198.18.0.1), the kernel's NFS client in namespace b (198.18.0.2), a
# veth pair between them delayed by netem (RTT/2 each way). Per RTT:
# a 1 GiB sequential write then a 1 GiB sequential read, O_DIRECT with
# 256 MiB requests (the client puts 256 one-MiB RPCs in flight, so that
# the server's socket buffers, not the client's readahead, bound the
# transfer), timed by coreutils dd. A sampler reads the server sockets'
# skmem (ss -tm) every 0.25 s during each transfer: the largest sndbuf
# (tb), rcvbuf (rb), queued send (w) and receive (r) memory.
# The client's tcp_wmem[2] and tcp_rmem[2] are 32 MB (its sender and
# receiver are never the limit); the server namespace keeps the kernel's
# defaults (printed), but tcp_rmem, which lab-net.sh sets to the same
# 32 MB as 7.2's default on a guest of this size.
# One line per transfer: "@@ nfs arm=A rtt=R op=write|read bytes=B secs=S
# MBps=M tb=.. rb=.. w=.. r=..".
# Variables: lab_arm (a label), lab_rtts (default 0,50,120,250), lab_mib
# (1024), lab_bs_mib (256), lab_threads (8).
set -u
. /usr/bin/lab-net.sh
arm=${lab_arm:-unknown}
rtts=$(echo "${lab_rtts:-0,50,120,250}" | tr , ' ')
mib=${lab_mib:-1024}
bs=${lab_bs_mib:-256}
count=$((mib / bs))

cat >/etc/netconfig <<'NC'
udp        tpi_clts      v     inet     udp     -       -
tcp        tpi_cots_ord  v     inet     tcp     -       -
udp6       tpi_clts      v     inet6    udp     -       -
tcp6       tpi_cots_ord  v     inet6    tcp     -       -
local      tpi_cots_ord  -     loopback  -      -       -
unix       tpi_cots_ord  -     loopback  -      -       -
NC
printf 'ip\t0\tIP\ntcp\t6\tTCP\nudp\t17\tUDP\n' >/etc/protocols
printf 'sunrpc\t111/tcp\nsunrpc\t111/udp\nnfs\t2049/tcp\nnfs\t2049/udp\n' >/etc/services
echo "/export 198.18.0.2(rw,no_root_squash,insecure,no_subtree_check,fsid=1)" >/etc/exports
mkdir -p /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs /export /mnt/nfs /run
: >/var/lib/nfs/etab
: >/var/lib/nfs/rmtab
ln -sf /proc/mounts /etc/mtab
echo "root:x:0:0::/:/bin/sh" >/etc/passwd
echo "nogroup:x:65534:" >/etc/group
echo "nobody:x:65534:65534::/:/bin/sh" >>/etc/passwd
mount -t tmpfs -o size=$((mib + 256))m export /export

veth_pair nfs || exit 1
ip netns exec b sysctl -qw net.ipv4.tcp_wmem="4096 16384 33554432"
for ns in a b; do
	echo "@@ sysctl ns=$ns tcp_wmem=\"$(ip netns exec $ns cat /proc/sys/net/ipv4/tcp_wmem)\"" \
		"tcp_rmem=\"$(ip netns exec $ns cat /proc/sys/net/ipv4/tcp_rmem)\"" \
		"tcp_mem=\"$(cat /proc/sys/net/ipv4/tcp_mem)\""
done

# The server in namespace a, the client in b, both mounted in the guest's
# one mount namespace (nsenter --net: NFSD and the NFS client belong to
# the network namespace of the task that mounts or starts them).
in_a() { nsenter --net=/run/netns/a "$@"; }
in_b() { nsenter --net=/run/netns/b "$@"; }
in_a mount -t nfsd nfsd /proc/fs/nfsd || { echo "@@ nfs: no nfsd filesystem"; exit 1; }
echo 10 >/proc/fs/nfsd/nfsv4gracetime
echo 10 >/proc/fs/nfsd/nfsv4leasetime
in_a exportfs -ra || echo "@@ nfs: exportfs failed"
in_a rpc.mountd -N 2 -N 3 --no-udp || echo "@@ nfs: rpc.mountd failed"
in_a rpc.nfsd -N 3 --no-udp ${lab_threads:-8} || echo "@@ nfs: rpc.nfsd failed"
echo "@@ nfsd versions=\"$(cat /proc/fs/nfsd/versions)\" threads=$(cat /proc/fs/nfsd/threads)" \
	"max_block_size=$(cat /proc/fs/nfsd/max_block_size) ports=\"$(tr '\n' ' ' </proc/fs/nfsd/portlist)\""
# One mount for the whole run, as a client keeps it: the connection (and
# its autotuned state) lives across the RTTs, one per mount (nconnect 1).
in_b mount.nfs4 198.18.0.1:/export /mnt/nfs -o vers=4.2,proto=tcp,rsize=1048576,wsize=1048576 ||
	{ echo "@@ nfs: mount failed"; exit 1; }
echo "@@ mount $(grep /mnt/nfs /proc/mounts)"

# sample_server FILE: the largest skmem fields of the server's port-2049
# sockets, every 0.25 s, until FILE.stop appears (bounded: the caller
# creates it when dd returns, and the guest's timeout bounds dd).
sample_server() {
	: >"$1"
	while [ ! -e "$1.stop" ]; do
		in_a /usr/bin/ss -tmnH state established '( sport = :2049 )' >>"$1" 2>/dev/null
		sleep 0.25
	done
}
skmem_max() {
	# rb, tb, w, r of the skmem lines; the largest of each.
	awk '/skmem:/ { s = $0; sub(/.*skmem:\(/, "", s); sub(/\).*/, "", s);
		n = split(s, f, ",");
		for (i = 1; i <= n; i++) { k = f[i]; gsub(/[0-9]/, "", k); v = f[i]; gsub(/[^0-9]/, "", v);
			if (v + 0 > m[k]) m[k] = v + 0 } }
		END { printf "tb=%d rb=%d w=%d r=%d", m["tb"], m["rb"], m["w"], m["r"] }' "$1"
}

# One transfer: OP (write|read), the dd arguments; prints the @@ line.
transfer() {
	op=$1 rtt=$2
	shift 2
	rm -f /tmp/skmem.stop
	sample_server /tmp/skmem &
	sampler=$!
	out=$(/usr/bin/dd "$@" 2>&1)
	rc=$?
	touch /tmp/skmem.stop
	wait $sampler
	line=$(echo "$out" | grep copied)
	bytes=$(echo "$line" | awk '{print $1}')
	secs=$(echo "$line" | sed 's/.*copied, \([0-9.e+-]*\) s.*/\1/')
	echo "@@ nfs arm=$arm rtt=$rtt op=$op rc=$rc bytes=${bytes:-0} secs=${secs:-0}" \
		"MBps=$(awk -v b="${bytes:-0}" -v s="${secs:-0}" 'BEGIN { if (s > 0) printf "%.1f", b / s / 1e6; else print 0 }')" \
		"$(skmem_max /tmp/skmem)"
	[ $rc -eq 0 ] || echo "@@ nfs: $op failed: $(echo "$out" | tail -3 | tr '\n' ' ')"
}

for rtt in $rtts; do
	if [ "$rtt" -gt 0 ]; then
		netem_rtt nfs $rtt 200000 || exit 1
	else
		tc -n a qdisc del dev va root 2>/dev/null
		tc -n b qdisc del dev vb root 2>/dev/null
	fi
	transfer write $rtt if=/dev/zero of=/mnt/nfs/f bs=${bs}M count=$count oflag=direct
	transfer read $rtt if=/mnt/nfs/f of=/dev/null bs=${bs}M count=$count iflag=direct
done
umount /mnt/nfs
in_a rpc.nfsd 0 2>/dev/null
echo "@@ nfs done arm=$arm"

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
# (1024), lab_bs_mib (256), lab_threads (8), lab_nconnect (1),
# lab_srv_wmem (tcp_wmem[2] of the server's namespace; default the
# kernel's), lab_mode (rtt, the default, or pressure: below).
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
[ -n "${lab_srv_wmem:-}" ] && ip netns exec a sysctl -qw net.ipv4.tcp_wmem="4096 16384 $lab_srv_wmem"
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
# One mount for the whole run, as a client keeps it: the connections (and
# their autotuned state) live across the RTTs; lab_nconnect per mount.
in_b mount.nfs4 198.18.0.1:/export /mnt/nfs \
	-o vers=4.2,proto=tcp,rsize=1048576,wsize=1048576,nconnect=${lab_nconnect:-1} ||
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
# skmem [FILE]: each skmem:(...) in `ss -m` output (FILE or standard
# input) as one line of its fields, "r=0 rb=131072 t=0 tb=46080 ...".
skmem() {
	awk '/skmem:/ { s = $0; sub(/.*skmem:\(/, "", s); sub(/\).*/, "", s);
		n = split(s, f, ","); line = "";
		for (i = 1; i <= n; i++) { k = f[i]; gsub(/[0-9]/, "", k); v = f[i]; gsub(/[^0-9]/, "", v);
			line = line (i > 1 ? " " : "") k "=" (v + 0) }
		print line }' "$@"
}
skmem_max() {
	# rb, tb, w, r of the skmem lines: the largest of each; and the
	# smallest send buffer of any socket in any sample (tbmin).
	skmem "$1" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); k = kv[1]; v = kv[2] + 0;
			if (v > m[k]) m[k] = v;
			if (k == "tb" && (tbmin == "" || v < tbmin)) tbmin = v } }
		END { printf "tb=%d rb=%d w=%d r=%d tbmin=%d", m["tb"], m["rb"], m["w"], m["r"], tbmin }'
}

# dd_copied TEXT: bytes, secs and MBps from dd's "copied" line in TEXT
# (its standard error); 0 each without one.
dd_copied() {
	copied=$(echo "$1" | awk '/copied/ { b = $1; s = $0; sub(/.*copied, /, "", s); sub(/ s.*/, "", s); f = 1 }
		END { if (!f) b = s = 0; printf "%s %s %s", b, s, (s + 0 > 0 ? sprintf("%.1f", b / s / 1e6) : 0) }')
	read -r bytes secs MBps <<-EOF
	$copied
	EOF
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
	dd_copied "$out"
	echo "@@ nfs arm=$arm rtt=$rtt op=$op rc=$rc bytes=$bytes secs=$secs MBps=$MBps" \
		"$(skmem_max /tmp/skmem)"
	[ $rc -eq 0 ] || echo "@@ nfs: $op failed: $(echo "$out" | tail -3 | tr '\n' ' ')"
}

# lab_mode=pressure: many connections under tcp_mem pressure. The 1 GiB
# file written at 0 ms without pressure, then at lab_rtt (50) ms with
# tcp_mem at lab_tcp_mem (pages, commas; default 16384,24576,32768: pressure
# from 96 MiB, limit 128 MiB, against 16 connections that a locked 16 MB
# NFSD could fill to 256 MiB) the read, and once the server's sockets
# have data queued a bystander flow in the same direction (namespace a to
# b, the rpc example's reads: 64 MiB or 30 s). Sampled every 0.25 s: the kernel's
# TCP memory (sockstat, pages) and the sums over NFSD's sockets of queued
# send memory (w) and send buffers (tb).
# TcpExt TCPMemoryPressures of the server's namespace: the times TCP
# entered memory pressure there.
memory_pressures() {
	in_a awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) n[i] = $i; h = 1 } else
		for (i = 1; i <= NF; i++) if (n[i] == "TCPMemoryPressures") print $i }' /proc/net/netstat
}

pressure() {
	prtt=${lab_rtt:-50}
	transfer write 0 if=/dev/zero of=/mnt/nfs/f bs=${bs}M count=$count oflag=direct
	netem_rtt nfs $prtt 200000 || exit 1
	p0=$(memory_pressures)
	tcp_mem_saved=$(cat /proc/sys/net/ipv4/tcp_mem)
	tcp_mem_lab=$(echo "${lab_tcp_mem:-16384,24576,32768}" | tr , ' ')
	echo "$tcp_mem_lab" >/proc/sys/net/ipv4/tcp_mem
	: >/tmp/psample
	rm -f /tmp/psample.stop
	(while [ ! -e /tmp/psample.stop ]; do
		mem=$(awk '/^TCP:/ { for (i = 1; i < NF; i++) if ($i == "mem") print $(i + 1) }' /proc/net/sockstat)
		in_a /usr/bin/ss -tmnH state established '( sport = :2049 )' 2>/dev/null | skmem |
			awk -v mem="$mem" '{ for (i = 1; i <= NF; i++) { split($i, kv, "=");
				if (kv[1] == "w") w += kv[2]; if (kv[1] == "tb") tb += kv[2] }; c++ }
				END { printf "%d %d %d %d\n", mem, w, tb, c }' >>/tmp/psample
		sleep 0.25
	done) &
	sampler=$!
	/usr/bin/dd if=/mnt/nfs/f of=/dev/null bs=${bs}M count=$count iflag=direct >/tmp/pread.out 2>&1 &
	reader=$!
	# The bystander starts once NFSD has replies queued (bounded: 10 s).
	i=0
	while [ $i -lt 40 ] && ! awk '$2 > 0 { f = 1 } END { exit !f }' /tmp/psample; do
		sleep 0.25
		i=$((i + 1))
	done
	# The bystander: the project's rpc example (examples/rpc), reads of
	# 64 KiB with 16 outstanding, the server in a sending the payload,
	# both sockets at the kernel's default sizes; 64 MiB or 30 s.
	in_a /usr/bin/rpc-server --listen=198.18.0.1:7000 --max-clients=1 --threads=4 \
		--seconds=60 >/tmp/by-srv.out 2>&1 &
	by_srv=$!
	i=0
	while [ $i -lt 100 ] && ! grep -q listening /tmp/by-srv.out; do
		sleep 0.05
		i=$((i + 1))
	done
	in_b /usr/bin/rpc-client --connect=198.18.0.1:7000 --op=read --size=64K --slots=16 \
		--bytes=64M --seconds=30 --json >/tmp/by.out 2>&1
	by_rc=$?
	wait $by_srv
	wait $reader
	read_rc=$?
	touch /tmp/psample.stop
	wait $sampler
	echo "$tcp_mem_saved" >/proc/sys/net/ipv4/tcp_mem
	p1=$(memory_pressures)
	dd_copied "$(cat /tmp/pread.out)"
	nfs_mbps=$MBps
	stats=$(sort -n /tmp/psample | awk '{ m[NR] = $1; if ($1 > mx) mx = $1; if ($2 > w) w = $2; if ($3 > tb) tb = $3; if ($4 > c) c = $4 }
		END { printf "tcpmem_max=%d tcpmem_med=%d srv_w_sum_max=%d srv_tb_sum_max=%d srv_socks=%d samples=%d",
			mx, m[int((NR + 1) / 2)], w, tb, c, NR }')
	by_mbps=$(sed -n 's/.*"MBps":\([0-9.e+-]*\).*/\1/p' /tmp/by.out | tail -1)
	[ -n "$by_mbps" ] || echo "@@ pressure: bystander: $(tr '\n' ' ' </tmp/by.out)"
	echo "@@ pressure arm=$arm rtt=$prtt tcp_mem=\"$tcp_mem_lab\" read_rc=$read_rc" \
		"nfs_MBps=$nfs_mbps by_rc=$by_rc by_MBps=$(awk -v v="${by_mbps:-0}" 'BEGIN { printf "%.1f", v }') $stats" \
		"pressures=$((p1 - p0))"
	# After the episode, tcp_mem back to the boot values: the same read on
	# the same connections shows what the send buffers grew back to.
	arm_saved=$arm
	arm="$arm_saved-after"
	transfer read $prtt if=/mnt/nfs/f of=/dev/null bs=${bs}M count=$count iflag=direct
	arm=$arm_saved
}

case ${lab_mode:-rtt} in
pressure) pressure ;;
*)
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
	;;
esac
umount /mnt/nfs
in_a rpc.nfsd 0 2>/dev/null
echo "@@ nfs done arm=$arm"

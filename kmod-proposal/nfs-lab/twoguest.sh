#!/usr/bin/env bash
# nfs-lab/twoguest.sh OUT REPS ARMS [--rtts R,R..] [--mib N] [--client ARM]
#     [--srv-mem MiB] [--cli-mem MiB] [--smp N] [--nconnect N]
#     [--image ARM=BZIMAGE] [--modules DIR] [--bs MiB] [--max-load L]
#     [--shared] [--resume] [--dry-run]
# The NFS experiment on two kernels: per arm and round, a server guest
# booting the arm's kernel ($SOCKBUF_KMOD_CACHE/nfs-<arm>.bzImage, from
# build-arms.sh) and a client guest booting the client kernel (default
# stock: the series' TCP change must not help the client), each its own
# qemu (TCG) with a virtio-net card, joined by a qemu socket backend on
# 127.0.0.1; netem on the client's egress (twoguest-init.sh). Arms run
# in rotation, REPS rounds, so that drift in the machine's speed falls on
# every arm alike. Per RTT a fresh mount; fio (Debian's) writes then
# reads lab_mib MiB with O_DIRECT.
#
# --image gives an arm a kernel image of its own (a distribution kernel,
# say); --modules DIR (a root holding lib/modules/<version>, depmod run)
# puts the modules such a kernel needs for the lab (virtio_net, nfsd,
# nfsv4, sch_netem, tcp_diag for ss, and what they depend on) into the initramfs,
# uncompressed, loaded in order by the guest's init.
#
# Keeps OUT/<arm>-<round>-{server,client}.log (consoles) and
# OUT/<arm>-<round>.txt (the client's result lines), OUT/load.txt (the
# load average before each round), OUT/arms.txt (each kernel's sha256
# and the sha256 of the patches it was built from); then table2.py OUT.
#
# A benchmark: run it on an otherwise idle machine. It refuses to start
# when the 1-minute load average is above --max-load (default 1.0) unless
# --shared is given, and writes the load before and after each round to
# OUT/load.txt. A line per round says how far it is and, from the rounds
# so far, when it will end. --resume keeps the pairs OUT already holds
# whole and good (each pair's result lines are written under another
# name and renamed when complete, and kept only when every transfer
# succeeded: a pair cut short or failed is run again), when OUT/arms.txt
# names the same kernels and patches: a long run can span sessions, split
# at pairs. --dry-run checks everything a run needs
# (kernels and the patches they were built from, programs, the NFS user
# space, memory, load), prints the plan and an estimate, and stops.
# Needs qemu-system-x86,
# busybox-static, cpio, iproute2, fio, and the NFS user space from
# Debian's nfs-kernel-server and nfs-common (downloaded and unpacked into
# the cache, not installed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${SOCKBUF_KMOD_CACHE:=/var/cache/sockbuf-kmod}"
out=${1:?usage: twoguest.sh OUT REPS ARMS [options]}
reps=${2:?REPS}
read -r -a arms <<<"${3:?ARMS}"
shift 3
rtts=0,50,120,250 mib=1024 bs=256 client=stock srv_mem=18432 cli_mem=4096 smp=2 nconnect=1
modules='' max_load=1.0 shared=0 dry_run=0 resume=0
declare -A image
while (($#)); do
	case $1 in
	--shared) shared=1; shift; continue ;;
	--resume) resume=1; shift; continue ;;
	--dry-run) dry_run=1; shift; continue ;;
	--max-load) max_load=$2 ;;
	--image) image[${2%%=*}]=${2#*=} ;;
	--modules) modules=$2 ;;
	--rtts) rtts=$2 ;;
	--mib) mib=$2 ;;
	--bs) bs=$2 ;;
	--client) client=$2 ;;
	--srv-mem) srv_mem=$2 ;;
	--cli-mem) cli_mem=$2 ;;
	--smp) smp=$2 ;;
	--nconnect) nconnect=$2 ;;
	*) echo "twoguest: unknown option $1" >&2; exit 2 ;;
	esac
	shift 2
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "twoguest: REPS must be a positive number" >&2; exit 2; }
kernel_of() { echo "${image[$1]:-$SOCKBUF_KMOD_CACHE/nfs-$1.bzImage}"; }
fail=0
declare -A seen
for a in "${arms[@]}" "$client"; do
	[[ -n ${seen[$a]:-} ]] && continue
	seen[$a]=1
	k=$(kernel_of "$a")
	if [[ ! -e $k ]]; then
		echo "twoguest: no $k: build-arms.sh $a, or --image $a=..." >&2
		fail=1
	elif [[ -z ${image[$a]:-} ]]; then
		# The patches the arm was built from, against the files now.
		arms_script=$here/build-arms.sh
		if [[ ! -e $SOCKBUF_KMOD_CACHE/nfs-$a.patches ]]; then
			echo "twoguest: $k has no nfs-$a.patches: rebuild it with build-arms.sh $a" >&2
			fail=1
		# Captured whole, then matched: grep -q would stop reading at the
		# match, and under pipefail the dry run's SIGPIPE fails the test.
		elif ! grep -q "$a: .*built (same patches" <<<"$(bash "$arms_script" --dry-run "$a")"; then
			echo "twoguest: $k was built from other patches than the tree's: build-arms.sh $a" >&2
			fail=1
		fi
	fi
done
for prog in qemu-system-x86_64 busybox cpio ip tc ss fio; do
	command -v "$prog" >/dev/null || { echo "twoguest: $prog is missing" >&2; fail=1; }
done
# qemu allocates guest memory as the guest touches it: a guest touches
# its memmap (1/64 of its size), the export's file (server) and some
# hundreds of MiB more, not all it is given.
need=$((srv_mem + cli_mem)) touched=$(((srv_mem + cli_mem) / 64 + mib + 1536))
avail=$(($(awk '/MemAvailable/ { print $2 }' /proc/meminfo) / 1024))
if ((avail < touched)); then
	echo "twoguest: the guests touch about $touched MiB, $avail MiB available" >&2
	fail=1
elif ((avail < need)); then
	echo "twoguest: the guests are given $need MiB, $avail MiB available: fine while they touch" \
		"about $touched MiB (qemu allocates lazily)"
fi
load=$(cut -d' ' -f1 /proc/loadavg)
busy=$(awk -v l="$load" -v m="$max_load" 'BEGIN { print (l > m) }')
if ((busy && !shared)); then
	echo "twoguest: load average $load > $max_load: not an idle machine (--shared runs anyway)" >&2
	((dry_run)) || fail=1
fi
IFS=, read -r -a rtt_list <<<"$rtts"
# A priori estimate per guest pair, from the smoke run and v3's runs on
# this kind of machine (TCG, 2 cores): about 90 s of boots, mount and
# ping, then 2 x lab_mib at the rate stock's 4 MiB send buffer allows
# (4.2 MB per RTT, at most 250 MB/s; the other arms are faster), 15 s of
# mount and socket reports per RTT.
est=$(awk -v r="$rtts" -v mib="$mib" 'BEGIN { n = split(r, a, ","); t = 90
	for (i = 1; i <= n; i++) { rate = a[i] > 0 ? 4200 / a[i] : 250; if (rate > 250) rate = 250
		t += 2 * mib * 1.048576 / rate + 15 }
	printf "%d", t }')
total=$((reps * ${#arms[@]}))
echo "twoguest: plan: $reps rounds x arms (${arms[*]}) = $total guest pairs, client $client," \
	"RTTs $rtts ms, $mib MiB in $bs MiB requests, nconnect $nconnect, server $srv_mem MiB," \
	"client $cli_mem MiB, $smp vCPUs each; about $((est / 60)) min per pair, $((est * total / 60)) min in all" \
	"(a priori; the rounds correct it); load $load"
((fail == 0)) || exit 2
if ((dry_run)); then
	[[ -e $SOCKBUF_KMOD_CACHE/nfs-tools/.extracted ]] ||
		echo "twoguest: dry run: the NFS user space is downloaded on the first run (apt-get download)"
	echo "twoguest: dry run: ready"
	exit 0
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The NFS user space, unpacked once.
tools=$SOCKBUF_KMOD_CACHE/nfs-tools
if [[ ! -e $tools/.extracted ]]; then
	rm -rf "$tools"
	mkdir -p "$tools/debs"
	(cd "$tools/debs" && apt-get -q download nfs-kernel-server nfs-common >/dev/null)
	for d in "$tools"/debs/*.deb; do dpkg-deb -x "$d" "$tools/root"; done
	touch "$tools/.extracted"
fi
dpkg -s libwrap0 >/dev/null 2>&1 || apt-get install -y -q libwrap0 >/dev/null

# One initramfs for both roles: busybox, iproute2's ip, tc and ss, fio,
# the NFS programs, each with the libraries ldd names.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,lib64}
cp /bin/busybox "$root/bin/busybox"
add_prog() { # path on this machine, path in the guest
	cp "$1" "$root/$2"
	ldd "$1" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
		mkdir -p "$root/$(dirname "$lib")"
		cp -L "$lib" "$root/$lib"
	done
}
add_prog "$(command -v ip)" usr/sbin/ip
add_prog "$(command -v tc)" usr/sbin/tc
add_prog "$(command -v ss)" usr/bin/ss
add_prog "$(command -v fio)" usr/bin/fio
for p in usr/sbin/rpc.mountd usr/sbin/exportfs usr/sbin/rpc.nfsd sbin/mount.nfs; do
	add_prog "$tools/root/$p" "usr/sbin/$(basename "$p")"
done
ln -sf mount.nfs "$root/usr/sbin/mount.nfs4"
if [[ -n $modules ]]; then
	ver=$(ls "$modules/lib/modules" | head -1)
	mkdir -p "$root/lib/modules"
	modprobe -a -d "$modules" -S "$ver" --show-depends virtio_net nfsd nfsv4 sch_netem tcp_diag |
		awk '$1 == "insmod" { print $2 }' | while read -r ko; do
		name=$(basename "${ko%.xz}")
		[[ -e $root/lib/modules/$name ]] && continue
		case $ko in
		*.xz) xz -dc "$ko" >"$root/lib/modules/$name" ;;
		*.zst) zstd -qdc "$ko" >"$root/lib/modules/$name" ;;
		*) cp "$ko" "$root/lib/modules/$name" ;;
		esac
		echo "/lib/modules/$name" >>"$root/modules.load"
	done
fi
cp "$here/twoguest-init.sh" "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initrd.gz"

arms_now=$(for a in "${arms[@]}" "$client"; do
	echo "$a kernel $(kernel_of "$a") $(sha256sum <"$(kernel_of "$a")" | cut -c1-16)" \
		"patches $(cut -c1-16 "$SOCKBUF_KMOD_CACHE/nfs-$a.patches" 2>/dev/null | tr '\n' ' ')"
done)
if ((resume)) && [[ -e $out/arms.txt && $(<"$out/arms.txt") != "$arms_now" ]]; then
	echo "twoguest: --resume: $out/arms.txt names other kernels or patches than these:" >&2
	diff <(cat "$out/arms.txt") <(echo "$arms_now") >&2 || true
	exit 1
fi
echo "$arms_now" >"$out/arms.txt"

guest() { # role, kernel arm, memory MiB, netdev option, log (lab_arm: $arm)
	local mac=52:54:00:12:34:01
	[[ $1 == client ]] && mac=52:54:00:12:34:02
	timeout 3600 qemu-system-x86_64 -accel tcg -nographic -m "$3" -smp "$smp" \
		-kernel "$(kernel_of "$2")" -initrd "$out/initrd.gz" -no-reboot \
		-netdev "socket,id=n0,$4" -device virtio-net-pci,netdev=n0,mac=$mac \
		-append "console=ttyS0 panic=-1 quiet role=$1 lab_arm=$arm lab_rtts=$rtts lab_mib=$mib lab_bs_mib=$bs lab_nconnect=$nconnect" \
		>"$5" 2>&1
}

port=$((20000 + RANDOM % 20000))
done_pairs=0 t0=$SECONDS
for ((round = 1; round <= reps; round++)); do
	for arm in "${arms[@]}"; do
		# Kept only whole and good: every transfer of every RTT rc=0 (a
		# pair whose transfers failed is run again, not tabled).
		if ((resume)) && [[ -e $out/$arm-$round.txt ]] &&
			(($(grep -c 'rc=0 ' "$out/$arm-$round.txt" || true) == 2 * ${#rtt_list[@]})); then
			echo "twoguest: round $round/$reps arm $arm: kept from an earlier run"
			total=$((total - 1))
			continue
		fi
		echo "round $round arm $arm load $(cut -d' ' -f1-3 /proc/loadavg) start $(date -u +%FT%TZ)" >>"$out/load.txt"
		port=$((port + 1))
		guest server "$arm" "$srv_mem" "listen=127.0.0.1:$port" "$out/$arm-$round-server.log" &
		spid=$!
		sleep 2
		guest client "$client" "$cli_mem" "connect=127.0.0.1:$port" "$out/$arm-$round-client.log" || true
		wait "$spid" || true
		tr -d '\r' <"$out/$arm-$round-client.log" | grep '^@@ nfs2 ' >"$out/$arm-$round.part" || true
		mv "$out/$arm-$round.part" "$out/$arm-$round.txt" # whole: --resume keeps it
		echo "round $round arm $arm load $(cut -d' ' -f1-3 /proc/loadavg) end $(date -u +%FT%TZ)" >>"$out/load.txt"
		cat "$out/$arm-$round.txt"
		done_pairs=$((done_pairs + 1))
		per=$(((SECONDS - t0) / done_pairs))
		echo "twoguest: round $round/$reps arm $arm: $(grep -c 'rc=0 ' "$out/$arm-$round.txt" || true)" \
			"of $((2 * ${#rtt_list[@]})) transfers ok, $done_pairs/$total pairs in $(((SECONDS - t0) / 60)) min," \
			"ETA $(date -u -d "@$(($(date +%s) + per * (total - done_pairs)))" +%H:%M) UTC," \
			"load $(cut -d' ' -f1 /proc/loadavg)"
	done
done
python3 "$here/table2.py" "$out"

#!/usr/bin/env bash
# kernel/selftest-guest.sh OUT KERNEL:NAME... [--runs N] [--sock-reps M]
#     [--sock-pin CPUMASK]: the series'
# selftests in qemu guests booted the way netdev's CI boots them
# (virtme-ng without systemd): a plain /init (busybox), proc, sys, devtmpfs
# and cgroup2 mounted, the memory controller NOT enabled by init, no
# network card. Each kernel is booted N times (default 3); each boot runs
#
#   cgroup/test_memcontrol   the whole file, as kselftest runs it (its
#                            main() enables +memory at the root, as for
#                            every memcg test); the series adds
#                            test_memcg_sock_reserve (net 2/2) and
#                            test_memcg_sock_sndbuf_pressure (net-next 2/2)
#   net/tcp_sndbuf_expand    net-next 2/2
#
# Before them, in the same boot, test_memcontrol_sock: test_memcontrol.c
# as patched with its tests[] cut down to the socket tests
# (test_memcg_sock, test_memcg_sock_reserve,
# test_memcg_sock_sndbuf_pressure), run with the kernel log cleared
# first, so that what it leaves in dmesg is its own: no "Out of memory",
# no "oom-kill", no "invoked oom-killer", no WARNING or BUG. The whole
# file's own OOM tests (test_memcg_oom_*) do kill on purpose, so the
# dmesg counts after the whole run are printed apart.
# --sock-reps M runs test_memcontrol_sock M times per boot (parts sock1
# .. sockM), to count how often a case fails; --sock-pin runs it under
# taskset CPUMASK.
# OUT/<name>-run<i>.log is the console; OUT/summary.txt one line per
# test and run, prefixed with the part (sock, whole, net). The tests are built static from the 7.2 base with the
# whole series applied (what the series' patch files add), with the
# machine's uapi headers (Debian 12: 6.1, which has SO_RESERVE_MEM and
# SO_BUF_LOCK). Needs qemu-system-x86, busybox-static, cpio.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
out=${1:?usage: selftest-guest.sh OUT KERNEL:NAME... [--runs N]}
shift
runs=3 sock_reps=1 sock_pin=''
kernels=()
while (($#)); do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--sock-reps) sock_reps=$2; shift 2 ;;
	--sock-pin) sock_pin=$2; shift 2 ;;
	*) kernels+=("$1"); shift ;;
	esac
done
((${#kernels[@]})) || { echo "selftest-guest: no KERNEL:NAME" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

ensure_base_package 7.2 || exit 2
base=$(pristine_base) || exit 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The two selftest directories, patched.
mkdir -p "$work/src/tools/testing"
cp -a "$base/tools/testing/selftests" "$work/src/tools/testing/"
mkdir -p "$work/src/tools/include"
cp -a "$base/tools/include/." "$work/src/tools/include/"
while read -r p; do
	# Only the selftests' part of each patch.
	(cd "$work/src" && git apply --include='tools/testing/selftests/*' "$p")
done < <(series_patches)
st=$work/src/tools/testing/selftests
mkdir -p "$work/root/tests" "$work/root/bin"
for t in cgroup/test_memcontrol net/tcp_sndbuf_expand; do
	mkdir -p "$work/build/${t%/*}"
	make -s -C "$st/${t%/*}" OUTPUT="$work/build/${t%/*}" LDFLAGS=-static \
		KHDR_INCLUDES= "$work/build/$t" >/dev/null 2>&1
	cp "$work/build/$t" "$work/root/tests/"
done
# test_memcontrol_sock: the same file with only the socket tests in
# tests[] (the T(...) lines are tests[] alone).
cp -a "$st/cgroup" "$st/cgroup-sock"
awk '!/^\tT\(test_/ || /^\tT\(test_memcg_sock/' "$st/cgroup/test_memcontrol.c" \
	>"$st/cgroup-sock/test_memcontrol.c"
grep -q 'T(test_memcg_sock_reserve)' "$st/cgroup-sock/test_memcontrol.c" ||
	{ echo "selftest-guest: no test_memcg_sock_reserve in tests[]" >&2; exit 1; }
mkdir -p "$work/build/cgroup-sock"
make -s -C "$st/cgroup-sock" OUTPUT="$work/build/cgroup-sock" LDFLAGS=-static \
	KHDR_INCLUDES= "$work/build/cgroup-sock/test_memcontrol" >/dev/null 2>&1
cp "$work/build/cgroup-sock/test_memcontrol" "$work/root/tests/test_memcontrol_sock"
cp /bin/busybox "$work/root/bin/busybox"
# test_memcg_sock connects to "localhost".
mkdir -p "$work/root/etc"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$work/root/etc/hosts"
cat >"$work/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t cgroup2 none /sys/fs/cgroup
ip link set lo up
echo "@@ kernel $(uname -r)"
echo "@@ root subtree_control at boot: '$(cat /sys/fs/cgroup/cgroup.subtree_control)'"
cd /tmp
echo "@@ dmesg at boot: $(dmesg | grep -cE 'WARNING|BUG|Out of memory|oom') WARNING/BUG/OOM lines"
dmesg -c >/dev/null
rep=1
while [ "$rep" -le "${sock_reps:-1}" ]; do
	echo "@@ part sock$rep"
	${sock_pin:+taskset "$sock_pin"} /tests/test_memcontrol_sock >sock.log 2>&1
	echo "@@ test_memcontrol_sock rc=$?"
	cat sock.log
	dmesg -c >sock-dmesg.txt
	echo "@@ dmesg sock$rep Out of memory: $(grep -c 'Out of memory' sock-dmesg.txt)"
	echo "@@ dmesg sock$rep oom-kill: $(grep -c 'oom-kill' sock-dmesg.txt)"
	echo "@@ dmesg sock$rep invoked oom-killer: $(grep -c 'invoked oom-killer' sock-dmesg.txt)"
	echo "@@ dmesg sock$rep WARNING/BUG: $(grep -cE 'WARNING|BUG' sock-dmesg.txt)"
	echo "@@ dmesg sock$rep lines: $(wc -l <sock-dmesg.txt)"
	sed 's/^/@@ sock-dmesg: /' sock-dmesg.txt | head -40
	rep=$((rep + 1))
done
echo "@@ part whole"
/tests/test_memcontrol >cg.log 2>&1
echo "@@ test_memcontrol rc=$?"
cat cg.log
echo "@@ part net"
/tests/tcp_sndbuf_expand >net.log 2>&1
echo "@@ tcp_sndbuf_expand rc=$?"
cat net.log
echo "@@ dmesg whole+net Out of memory: $(dmesg | grep -c 'Out of memory')"
echo "@@ dmesg whole+net oom-kill: $(dmesg | grep -c 'oom-kill')"
# The memcg OOM reports in full: which charge, from where.
dmesg | grep -B2 -A45 'invoked oom-killer' | grep -vE '\] (R[A-Z0-9]{2}|[A-Z]S|CR[0-9]|DR[0-9]|Code|Mem-Info|active_|Node |DMA|lowmem|[0-9]+ (pages|total)|Free swap|Total swap|Tasks state)' | head -400
echo "@@ done"
poweroff -f
INIT
chmod +x "$work/root/init"
mkdir -p "$work/root/proc" "$work/root/sys" "$work/root/dev" "$work/root/tmp"
(cd "$work/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

: >"$out/summary.txt"
for k in "${kernels[@]}"; do
	image=${k%%:*} name=${k##*:}
	for ((i = 1; i <= runs; i++)); do
		log=$out/$name-run$i.log
		start=$SECONDS load0=$(cut -d' ' -f1-3 /proc/loadavg)
		timeout 900 qemu-system-x86_64 -accel tcg -nographic -m 2048 -smp 2 \
			-kernel "$image" -initrd "$work/initrd.gz" -no-reboot -nic none \
			-append "console=ttyS0 panic=-1 quiet sock_reps=$sock_reps${sock_pin:+ sock_pin=$sock_pin}" \
			>"$log" 2>&1 || true
		tr -d '\r' <"$log" | awk -v k="$name" -v r="$i" -v s=$((SECONDS - start)) \
			-v load="$load0 (before) $(cut -d' ' -f1-3 /proc/loadavg) (after)" '
			/^@@ part / { part = $3 }
			/^(ok|not ok) [0-9]+ / { t = $0; sub(/^(not )?ok [0-9]+ /, "", t)
				if (t ~ /sock|sndbuf/) printf "%s run%d %s %s: %s\n", k, r, part, t, ($1 == "ok" ? "ok" : "FAIL") }
			/^#  *(OK|FAIL|SKIP)/ && /sndbuf/ { printf "%s run%d %s %s\n", k, r, part, $0 }
			/^# (sndbuf|[0-9]+ bytes sent)/ { printf "%s run%d %s   %s\n", k, r, part, $0 }
			/^# .*(client|forced|autotuned|set) / { printf "%s run%d %s   %s\n", k, r, part, $0 }
			/^@@ (dmesg|kernel|root|test_|tcp_)/ { printf "%s run%d %s\n", k, r, $0 }
			END { printf "%s run%d boot took %d s, load %s\n", k, r, s, load }' | tee -a "$out/summary.txt"
	done
done

#!/usr/bin/env bash
# nfs-lab/run.sh OUT [REPS] [ARMS] [--param lab_X=V...]: the NFS
# experiment. Boots each arm's kernel (build-arms.sh) in a qemu guest (2 vCPUs, 6 GiB, TCG) running
# nfs.sh, arms in rotation (stock, locked, series; then again) so that
# drift in the machine's speed falls on every arm alike; REPS rounds
# (default 3). Keeps each guest's console in OUT/<arm>-<round>.log and
# its result lines in OUT/<arm>-<round>.txt; then table.py OUT. An arm
# named KERNEL-wmemNM is KERNEL with the server namespace's tcp_wmem[2]
# raised to N MiB (the sysctl an administrator could raise instead).
#
# Needs qemu-system-x86, busybox-static, iproute2, coreutils, and the
# NFS user space from Debian's nfs-kernel-server and nfs-common packages,
# which are downloaded (apt-get download) and unpacked into the cache, not
# installed; their one library missing on a build machine, libwrap0, is
# installed (root); and the project's rpc example (build/bin). Run on an
# otherwise idle machine: it is a benchmark.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${SOCKBUF_KMOD_CACHE:=/var/cache/sockbuf-kmod}"
out=${1:?usage: run.sh OUT [REPS] [ARMS]}
reps=${2:-3}
read -r -a arms <<<"${3:-stock locked series}"
params=("${@:4}")

tools=$SOCKBUF_KMOD_CACHE/nfs-tools
if [[ ! -e $tools/.extracted ]]; then
	rm -rf "$tools"
	mkdir -p "$tools/debs"
	(cd "$tools/debs" && apt-get -q download nfs-kernel-server nfs-common >/dev/null)
	for d in "$tools"/debs/*.deb; do dpkg-deb -x "$d" "$tools/root"; done
	touch "$tools/.extracted"
fi
dpkg -s libwrap0 >/dev/null 2>&1 || apt-get install -y -q libwrap0 >/dev/null
programs=()
for p in usr/sbin/rpc.mountd usr/sbin/exportfs usr/sbin/rpc.nfsd sbin/mount.nfs; do
	programs+=(--program "$tools/root/$p")
done
# mount.nfs4 is mount.nfs under another name (it reads argv[0]).
ln -sf "$tools/root/sbin/mount.nfs" "$tools/mount.nfs4"
programs+=(--program "$tools/mount.nfs4" --program /bin/dd --program "$(command -v ss)")
# The pressure mode's bystander: the project's rpc example ($SOCKBUF_BIN_DIR,
# default build/bin; cmake --build build).
bin=${SOCKBUF_BIN_DIR:-$repo/build/bin}
for p in rpc-server rpc-client; do
	[[ -x $bin/$p ]] || { echo "run: no $bin/$p: build the project first (cmake --build build)" >&2; exit 2; }
	programs+=(--program "$bin/$p")
done


# arm_kernel ARM, arm_params ARM: the kernel and the extra lab settings.
arm_kernel() { echo "${1%-wmem*M}"; }
arm_params() {
	[[ $1 =~ -wmem([0-9]+)M$ ]] && echo "--param lab_srv_wmem=$((BASH_REMATCH[1] * 1048576))"
	return 0
}
for arm in "${arms[@]}"; do
	k=$(arm_kernel "$arm")
	[[ -e $SOCKBUF_KMOD_CACHE/nfs-$k.bzImage ]] ||
		{ echo "run: no $SOCKBUF_KMOD_CACHE/nfs-$k.bzImage: run nfs-lab/build-arms.sh $k" >&2; exit 2; }
done
# A benchmark runs alone: wait (at most 30 minutes, a line a minute) while
# another qemu guest runs on the machine, then write the load beside it.
wait_for_quiet() {
	local waited=0
	while pgrep -f qemu-system >/dev/null; do
		((waited % 60 == 0)) && echo "run: another qemu guest is running; waiting ($waited s)"
		((waited >= 1800)) && { echo "run: still busy after 30 minutes; going on" >&2; return 0; }
		sleep 5
		waited=$((waited + 5))
	done
}

mkdir -p "$out"
echo "run: $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg), ${#arms[@]} arms x $reps rounds" | tee -a "$out/runs.txt"
for ((round = 1; round <= reps; round++)); do
	for arm in "${arms[@]}"; do
		log=$out/$arm-$round.log
		wait_for_quiet
		echo "run: round $round/$reps, $arm, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/runs.txt"
		read -r -a extra < <(arm_params "$arm") || true
		python3 "$repo/bench/lab/guest/run.py" --kernel "$SOCKBUF_KMOD_CACHE/nfs-$(arm_kernel "$arm").bzImage" \
			--lab "$here/nfs.sh" "${programs[@]}" --param "lab_arm=$arm" "${extra[@]}" "${params[@]}" \
			--smp 2 --mem 6144 --timeout 2400 --log "$log" | tail -1
		grep -a '^@@' "$log" | tr -d '\r' >"$out/$arm-$round.txt" || true
		grep -aE '@@ (nfs|pressure) arm=' "$out/$arm-$round.txt" | sed 's/^@@ //' ||
			echo "run: $arm round $round: no result (see $log)"
	done
done
echo "run: $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg), done" | tee -a "$out/runs.txt"
python3 "$here/table.py" "$out"

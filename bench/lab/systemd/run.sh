#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh [--debs DIR] [--kernel NAME] [--timeout S] [--out DIR]:
# `systemctl start sockbufd` on a machine whose PID 1 is systemd.  Boots a
# Debian 12 (bookworm) root filesystem under qemu (TCG, 2 vCPUs, 1.5 GB)
# with a Debian kernel of the kernel matrix's cache, the freshly built
# sockbuf packages installed with dpkg, and runs guest.sh there from a
# oneshot unit (sockbuf-lab.service) that powers the guest off.
#
#   --debs DIR     the .debs to install (default: packaging/build.sh builds
#                  them into CACHE/build-pkg, CACHE/debs)
#   --commit REV   build them from REV (git archive: committed code only,
#                  into CACHE/src) instead of the working tree
#   --kernel NAME  a kernel of tests/kernels/matrix.txt already in the
#                  matrix's cache (default 6.12-deb12: bookworm's 6.12,
#                  what Debian 12 runs from its security/backports suites;
#                  tests/kernels/run-matrix --kmod --only 6.12-deb12 fetches it)
#   --bin-dir DIR  a build's bin directory: its sockbuf_cut_publisher (a
#                  bench program, not packaged) lets the guest check restores
#                  from the event programs' records (default build/bin;
#                  skipped when absent)
#   --timeout S    hard limit for the guest (default 900 s)
#   --out DIR      console log and the guest's /lab-out (default CACHE/out)
#
# Big artefacts live under CACHE=${SOCKBUF_SYSTEMD_LAB:-/var/cache/sockbuf-systemd-lab}:
# the debootstrap root (made once, about 340 MB), its downloaded packages,
# the disk image (rebuilt each run from a copy of the root: mkfs.ext4 -d,
# no mount).  The package build and qemu run under
# flock /tmp/sockbuf-heavy.lock.  Needs root (debootstrap, chroot).
# Exit: 0 the guest said "RESULT: pass", 1 it failed or never said,
# 2 a tool is missing, 77 not root.
set -euo pipefail
top=$(cd "$(dirname "$0")/../../.." && pwd)
here=$top/bench/lab/systemd
cache=${SOCKBUF_SYSTEMD_LAB:-/var/cache/sockbuf-systemd-lab}
kcache=${SOCKBUF_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sockbuf-kernels}
lock=/tmp/sockbuf-heavy.lock
debs= commit= kernel=6.12-deb12 timeout=900 out= bindir=$top/build/bin
while (($#)); do
	case $1 in
	--debs) debs=$(realpath "$2"); shift 2 ;;
	--commit) commit=$(git -C "$top" rev-parse --verify "$2^{commit}"); shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--bin-dir) bindir=$(realpath "$2"); shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--out) out=$(realpath -m "$2"); shift 2 ;;
	*) sed -n '3,24p' "$0" >&2; exit 2 ;;
	esac
done
out=${out:-$cache/out}
say() { echo "lab: $*"; }
die() { echo "lab: $*" >&2; exit "${2:-1}"; }

[[ $(id -u) == 0 ]] || { echo "lab: skipped: needs root (debootstrap, chroot)"; exit 77; }
for t in debootstrap:debootstrap qemu-system-x86_64:qemu-system-x86 mkfs.ext4:e2fsprogs \
	debugfs:e2fsprogs depmod:kmod flock:util-linux; do
	command -v "${t%%:*}" >/dev/null || die "${t%%:*} is missing (package ${t#*:})" 2
done
mkdir -p "$cache" "$out"

# The working root and the proc mount made in it: removed however the
# script ends.
root=$cache/root
cleanup() {
	local m
	for m in "$root/proc" "$root/sys" "$root/dev"; do
		if mountpoint -q "$m" 2>/dev/null; then umount -l "$m"; fi
	done
	rm -rf "$root"
}
trap cleanup EXIT

# 1. The kernel: vmlinuz and modules as run-matrix unpacked them.
read -r vmlinuz kroot release < <(cd "$top/bench/lab/guest" && python3 -c '
import sys, run
vm, root, rel = run.find_kernel(sys.argv[1], sys.argv[2])
if root is None:
    raise SystemExit("lab: %s is a bare bzImage: the root needs a packaged kernel" % vm)
print(vm, root, rel)' "$kernel" "$kcache") || die "no kernel $kernel (the line above)" 2
say "kernel $release ($vmlinuz)"

# 2. The Debian 12 root, made once.
base=$cache/base-bookworm
if [[ ! -f $base/.complete ]]; then
	mirror=$(python3 "$top/tests/kernels/kmatrix/fetch.py" mirror) ||
		die "no Debian mirror for debootstrap (the line above)"
	rm -rf "$base"
	mkdir -p "$cache/debootstrap-debs"
	say "debootstrap bookworm from $mirror into $base (a few minutes; log $base.log)"
	# systemd as init, what the lab uses, and the libraries sockbuf-tools
	# depends on (dpkg -i installs it without a network in the chroot).
	inc=systemd,systemd-sysv,udev,dbus,curl,ca-certificates,initramfs-tools,kmod,procps
	inc+=,iproute2,python3,libbpf1,libcap-ng0,libfmt9,libprometheus-cpp-core1.0
	inc+=,libprometheus-cpp-pull1.0,libsystemd0
	timeout 1800 debootstrap --variant=minbase --include="$inc" \
		--cache-dir="$cache/debootstrap-debs" bookworm "$base" "$mirror" >"$base.log" 2>&1 &
	ds=$!
	while kill -0 "$ds" 2>/dev/null; do
		sleep 30
		kill -0 "$ds" 2>/dev/null && say "debootstrap: $(tail -n 1 "$base.log")"
	done
	wait "$ds" || { tail -n 20 "$base.log" >&2; rm -rf "$base"; die "debootstrap failed ($base.log)"; }
	touch "$base/.complete"
fi
say "root: $base ($(du -sh "$base" | cut -f1))"

# 3. The packages.
if [[ -z $debs ]]; then
	debs=$cache/debs src=$top
	if [[ -n $commit ]]; then
		src=$cache/src
		rm -rf "$src"
		mkdir -p "$src"
		git -C "$top" archive "$commit" | tar -x -C "$src"
	fi
	say "building the packages from ${commit:-the working tree} (packaging/build.sh, under $lock; log $cache/build.log)"
	rm -rf "$debs"
	timeout 3600 flock "$lock" bash "$src/packaging/build.sh" "$cache/build-pkg${commit:+-src}" "$debs" \
		>"$cache/build.log" 2>&1 || { tail -n 20 "$cache/build.log" >&2; die "package build failed"; }
fi
pkgs=("$debs"/libsockbuf0_*.deb "$debs"/sockbuf-tools_*.deb)
for p in "${pkgs[@]}"; do [[ -f $p ]] || die "no $p" 2; done
say "packages: ${pkgs[*]##*/}"

# 4. The run's root: a copy of the base, the kernel's modules, the
# packages, an initramfs that finds /dev/vda, the lab's unit.
say "preparing the image's root"
rm -rf "$root"
cp -a "$base" "$root"
rm -f "$root/.complete"
mkdir -p "$root/lib/modules"
cp -a "$kroot/lib/modules/$release" "$root/lib/modules/"
depmod -b "$root" "$release"
# mkinitramfs reads the kernel's config (its compressors).
cp "$kroot/boot/config-$release" "$root/boot/" 2>/dev/null ||
	find "$kroot" -name "config-$release" -exec cp {} "$root/boot/" \; -quit
cp "${pkgs[@]}" "$root/tmp/"
mount -t proc proc "$root/proc"
inroot=()
for p in "${pkgs[@]}"; do inroot+=("/tmp/${p##*/}"); done
chroot "$root" dpkg -i "${inroot[@]}" >"$out/dpkg.log" 2>&1 ||
	{ cat "$out/dpkg.log" >&2; die "dpkg -i failed in the root"; }
grep -E '^(Setting up|Unpacking)' "$out/dpkg.log" | sed 's/^/lab:   /'
# sockbuf-tools' postinst enables sockbufd.service; the lab looks at the
# server without the daemon first and starts it itself.
# deb-systemd-helper acts only for a package's maintainer script (init-system-helpers
# 1.65.2 exits 1 without DPKG_MAINTSCRIPT_PACKAGE).
chroot "$root" env DPKG_MAINTSCRIPT_PACKAGE=sockbuf-tools deb-systemd-helper disable sockbufd.service
rm -f "$root"/tmp/*.deb
# Only what the boot needs from the initramfs: virtio disk, ext4.
printf 'MODULES=list\nCOMPRESS=gzip\n' >"$root/etc/initramfs-tools/conf.d/sockbuf-lab.conf"
printf 'virtio_pci\nvirtio_blk\next4\ncrc32c_generic\n' >>"$root/etc/initramfs-tools/modules"
timeout 600 chroot "$root" mkinitramfs -o "/boot/initrd.img-$release" "$release" \
	>"$out/mkinitramfs.log" 2>&1 || { cat "$out/mkinitramfs.log" >&2; die "mkinitramfs failed"; }
umount "$root/proc"
initrd=$cache/initrd.img-$release
cp "$root/boot/initrd.img-$release" "$initrd"
echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$root/etc/fstab"
echo sockbuf-lab >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 sockbuf-lab\n' >"$root/etc/hosts"
: >"$root/etc/machine-id"  # systemd makes one at boot
install -d -m 0755 "$root/lab"
install -m 0755 "$here/guest.sh" "$root/lab/guest.sh"
install -m 0755 "$here/cut.py" "$root/lab/cut.py"
install -m 0755 "$top/tests/shim/py_listener.py" "$root/lab/py_listener.py"
if [[ -x $bindir/sockbuf_cut_publisher ]]; then
	install -m 0755 "$bindir/sockbuf_cut_publisher" "$root/lab/"
else
	say "no $bindir/sockbuf_cut_publisher: the guest skips the event-record check"
fi
install -m 0644 "$here/sockbuf-lab.service" "$root/etc/systemd/system/sockbuf-lab.service"
ln -sf /etc/systemd/system/sockbuf-lab.service \
	"$root/etc/systemd/system/multi-user.target.wants/sockbuf-lab.service"
# No login prompt on the console the lab writes to; no timers in its way.
for u in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer \
	apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
	ln -sf /dev/null "$root/etc/systemd/system/$u"
done
img=$cache/sockbuf-lab.ext4
rm -f "$img"
mkfs.ext4 -q -F -L sockbuf-lab -d "$root" "$img" 2G >/dev/null
say "image: $img ($(du -h "$img" | cut -f1) used of 2G)"
rm -rf "$root"

# 5. The boot: systemd as PID 1 from /dev/vda, the console on ttyS0.
log=$out/console.log
say "booting $release under qemu (TCG, timeout $timeout s, waits for $lock); console $log"
t0=$SECONDS
set +e
flock "$lock" timeout --kill-after=10 "$timeout" qemu-system-x86_64 -accel tcg -cpu max \
	-smp 2 -m 1536 -nographic -no-reboot -nic none \
	-kernel "$vmlinuz" -initrd "$initrd" \
	-append "root=/dev/vda rw console=ttyS0 panic=-1 quiet systemd.show_status=auto" \
	-drive "file=$img,if=virtio,format=raw,cache=unsafe" </dev/null 2>&1 |
	tr -d '\r' | tee "$log" | sed -un 's/^LAB \(== \|RESULT\|FAIL\|ok: \)/lab: guest: \1/p'
rc=${PIPESTATUS[0]}
set -e
say "guest ended after $((SECONDS - t0)) s, qemu exit $rc"

# 6. The guest's own copy of its output, out of the image (no mount).
rm -rf "$out/lab-out"
debugfs -R "rdump /lab-out $out" "$img" >/dev/null 2>&1 || true
[[ -f $out/lab-out/guest.log ]] && say "guest log: $out/lab-out/guest.log"
if grep -q '^LAB RESULT: pass' "$log"; then
	say "pass"
	exit 0
fi
[[ $rc == 124 || $rc == 137 ]] && { say "the guest reached the time limit; its last lines:"; tail -n 40 "$log"; }
grep -q '^LAB RESULT' "$log" || say "the guest never said its result"
say "fail"
exit 1

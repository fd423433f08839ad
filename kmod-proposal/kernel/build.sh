#!/usr/bin/env bash
# kernel/build.sh [--unpatched]: builds a base of the series
# ($SOCKBUF_KMOD_BASE: 7.2, the default, or 6.12; base.env) with the series
# (net, net-next, sunrpc) applied, or without it, for the qemu guest of
# tests/kernels, and installs the series' selftests beside it.
#
#   config  `make tinyconfig` plus guest.config (everything built in) and
#           compile.config (SUNRPC as a module, out of bzImage)
#   kernel  $SOCKBUF_KMOD_CACHE/build-<base>-<patched|unpatched>/arch/x86/boot/bzImage
#   test    $SOCKBUF_KMOD_CACHE/build-<base>-patched/kselftest: kselftest.sh's
#           install of net:tcp_sndbuf_expand (selftest-guest.sh runs the cgroup tests)
#
# The W=1 builds of the touched objects are w1.sh's (check.sh --w1).
#
# Needs flex, bison, bc, libelf-dev, libssl-dev and rsync (kselftest
# install) from Debian.
#
# Then: tests/kernels/run-matrix --full --kernel-image <bzImage> ...
# Prints the wall time of `make -j2 bzImage` (2 jobs: the machine has two
# cores and other builds share them).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

variant=patched
[[ ${1:-} == --unpatched ]] && variant=unpatched
read -r -a bases <<<"$BASES"
ensure_base_package "${SOCKBUF_KMOD_BASE:-${bases[0]}}" || exit 2
base=$(pristine_base) || exit 2
src="$SOCKBUF_KMOD_CACHE/src-$BASE_NAME-$variant"
out="$SOCKBUF_KMOD_CACHE/build-$BASE_NAME-$variant"

if [[ ! -e $src/.prepared ]]; then
	rm -rf "$src"
	cp -a "$base" "$src"
	if [[ $variant == patched ]]; then
		while read -r p; do
			(cd "$src" && patch -p1 -s <"$p")
		done < <(series_patches)
	fi
	touch "$src/.prepared"
fi

mkdir -p "$out"
make -s -C "$src" O="$out" tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$KMOD_DIR/kernel/guest.config" \
	"$KMOD_DIR/kernel/compile.config" >/dev/null
make -s -C "$src" O="$out" olddefconfig
# Every option asked for must have survived olddefconfig.
while read -r opt; do
	grep -qx "$opt" "$out/.config" || { echo "build: $opt did not survive olddefconfig" >&2; exit 1; }
done < <(grep -hE '^CONFIG_' "$KMOD_DIR/kernel/guest.config" "$KMOD_DIR/kernel/compile.config")

start=$SECONDS
nice -n 19 make -C "$src" O="$out" -j2 bzImage >"$out/build.log" 2>&1 ||
	{ tail -20 "$out/build.log" >&2; exit 1; }
echo "build: $variant $BASE_PACKAGE $BASE_VERSION: make -j2 bzImage took $((SECONDS - start)) s"
echo "build: kernel $out/arch/x86/boot/bzImage"

if [[ $variant == patched ]]; then
	# The selftests, installed the kselftest way beside the kernel
	# (kselftest.sh; it needs no kernel build and runs alone too).
	bash "$KMOD_DIR/kernel/kselftest.sh" "$out/kselftest"
fi

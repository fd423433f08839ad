#!/usr/bin/env bash
# kernel/build.sh [--unpatched]: builds the pinned base with the series
# applied (or without it) for the qemu guest of tests/kernels, and the
# series' kselftest program.
#
#   config  `make tinyconfig` plus guest.config (everything built in)
#   kernel  $SOCKBUF_KMOD_CACHE/build-<patched|unpatched>/arch/x86/boot/bzImage
#   test    $SOCKBUF_KMOD_CACHE/build-patched/kselftest: the kselftest
#           install of net:so_buf_floor (run_kselftest.sh), linked
#           statically for the busybox guest
#
# Then: tests/kernels/run-matrix --full --kernel-image <bzImage> ...
# Prints the wall time of `make -j2 bzImage` (2 jobs: the machine has two
# cores and other builds share them).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

variant=patched
[[ ${1:-} == --unpatched ]] && variant=unpatched
ensure_base_package || exit 2
base=$(pristine_base)
src="$SOCKBUF_KMOD_CACHE/src-$variant"
out="$SOCKBUF_KMOD_CACHE/build-$variant"

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
"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$KMOD_DIR/kernel/guest.config" >/dev/null
make -s -C "$src" O="$out" olddefconfig
# Every option asked for must have survived olddefconfig.
while read -r opt; do
	grep -qx "$opt" "$out/.config" || { echo "build: $opt did not survive olddefconfig" >&2; exit 1; }
done < <(grep -E '^CONFIG_' "$KMOD_DIR/kernel/guest.config")

start=$SECONDS
make -C "$src" O="$out" -j2 bzImage >"$out/build.log" 2>&1 ||
	{ tail -20 "$out/build.log" >&2; exit 1; }
echo "build: $variant $BASE_PACKAGE $BASE_VERSION: make -j2 bzImage took $((SECONDS - start)) s"
echo "build: kernel $out/arch/x86/boot/bzImage"

if [[ $variant == patched ]]; then
	# The kselftest way, restricted to the series' test: `make install`
	# writes run_kselftest.sh, the runner and net/so_buf_floor, linked
	# statically for the busybox guest.
	make -s -C "$src" O="$out" headers_install INSTALL_HDR_PATH="$out/usr" >/dev/null
	rm -rf "$out/kselftest"
	make -s -C "$src/tools/testing/selftests" TARGETS=net \
		TEST_GEN_PROGS=so_buf_floor TEST_PROGS= TEST_GEN_FILES= TEST_PROGS_EXTENDED= \
		TEST_GEN_PROGS_EXTENDED= TEST_FILES= KHDR_INCLUDES="-isystem $out/usr/include" \
		LDFLAGS=-static INSTALL_PATH="$out/kselftest" install >/dev/null
	echo "build: kselftest $out/kselftest (run_kselftest.sh -t net:so_buf_floor)"
fi

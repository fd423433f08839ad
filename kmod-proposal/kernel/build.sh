#!/usr/bin/env bash
# kernel/build.sh [--unpatched]: builds a base of the series
# ($SOCKBUF_KMOD_BASE: 7.2, the default, or 6.12; base.env) with the series
# applied (or without it) for the qemu guest of tests/kernels, compiles the
# objects the series touches with W=1, and installs the series' kselftest.
#
#   config  `make tinyconfig` plus guest.config (everything built in) and
#           compile.config (RDS and SUNRPC as modules, for the W=1 check)
#   kernel  $SOCKBUF_KMOD_CACHE/build-<base>-<patched|unpatched>/arch/x86/boot/bzImage
#   test    $SOCKBUF_KMOD_CACHE/build-<base>-patched/kselftest: the
#           kselftest install of net:tcp_sndbuf_floor (run_kselftest.sh),
#           linked statically for the busybox guest
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
nice -n 15 make -C "$src" O="$out" -j2 bzImage >"$out/build.log" 2>&1 ||
	{ tail -20 "$out/build.log" >&2; exit 1; }
echo "build: $variant $BASE_PACKAGE $BASE_VERSION: make -j2 bzImage took $((SECONDS - start)) s"
echo "build: kernel $out/arch/x86/boot/bzImage"

# The C files the series touches, compiled with W=1 (the patched build
# must add no warning; the log keeps them for comparison with unpatched).
mapfile -t patches < <(series_patches)
mapfile -t objs < <(grep -h '^+++ b/.*\.c$' "${patches[@]}" | sed 's|^+++ b/||; s|\.c$|.o|' |
	grep -v '^tools/' | sort -u)
if nice -n 15 make -C "$src" O="$out" -j2 W=1 "${objs[@]}" >"$out/w1.log" 2>&1; then
	echo "build: W=1 ${objs[*]}: $(grep -c 'warning:' "$out/w1.log") warnings"
else
	tail -20 "$out/w1.log" >&2
	exit 1
fi

if [[ $variant == patched ]]; then
	# The kselftest way, restricted to the series' test: `make install`
	# writes run_kselftest.sh, the runner and net/tcp_sndbuf_floor,
	# linked statically for the busybox guest. It is a user-space
	# program: the same install runs on kernels without the series.
	make -s -C "$src" O="$out" headers_install INSTALL_HDR_PATH="$out/usr" >/dev/null
	rm -rf "$out/kselftest"
	# TEST_GEN_PROGS given on the command line is not prefixed with
	# $(OUTPUT) by lib.mk, and the pattern rule wants that prefix.
	make -s -C "$src/tools/testing/selftests" TARGETS=net \
		TEST_GEN_PROGS="$src/tools/testing/selftests/net/tcp_sndbuf_floor" TEST_PROGS= TEST_GEN_FILES= TEST_PROGS_EXTENDED= \
		TEST_GEN_PROGS_EXTENDED= TEST_FILES= KHDR_INCLUDES="-isystem $out/usr/include" \
		LDFLAGS=-static INSTALL_PATH="$out/kselftest" install >/dev/null
	echo "build: kselftest $out/kselftest (run_kselftest.sh -t net:tcp_sndbuf_floor)"
	# Not part of the series: the project's probe of a forced 16 MB send
	# buffer at 50/120/250 ms, carried in the same tree for the kmod
	# guest (tests/kernels/guest/kmod-init.sh runs it when present).
	mkdir -p "$out/kselftest/sockbuf"
	gcc -Wall -Wextra -O2 -static -pthread -o "$out/kselftest/sockbuf/sndbuf_hold" \
		"$KMOD_DIR/kernel/sndbuf_hold.c"
fi

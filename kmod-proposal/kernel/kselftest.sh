#!/usr/bin/env bash
# kernel/kselftest.sh [DIR]: installs the series' selftests the kselftest
# way, without building a kernel: run_kselftest.sh, its runner and
# net/tcp_sndbuf_expand (the
# net-next series'), linked statically for the busybox guest of
# tests/kernels, plus the project's sndbuf_hold probe (sockbuf/).
#
# Base: $SOCKBUF_KMOD_BASE (7.2, the default, or 6.12; base.env). The
# selftests are user-space programs: the same install runs on kernels
# with and without the series. The uapi headers come from the pristine
# base (`make headers_install`; the series changes no uapi header).
#
#   DIR  default $SOCKBUF_KMOD_CACHE/kselftest-<base>; then
#        tests/kernels/run-matrix --kmod --kselftest DIR ...
#
# Trees in $SOCKBUF_KMOD_CACHE: kselftest-src-<base> (a hard-linked copy
# of the pristine tree with the series applied; GNU patch replaces the
# files it changes, so the pristine tree is never written), and
# kselftest-hdr-<base> (headers_install). About a minute on two cores.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

read -r -a bases <<<"$BASES"
ensure_base_package "${SOCKBUF_KMOD_BASE:-${bases[0]}}" || exit 2
base=$(pristine_base) || exit 2
dest=${1:-$SOCKBUF_KMOD_CACHE/kselftest-$BASE_NAME}
src="$SOCKBUF_KMOD_CACHE/kselftest-src-$BASE_NAME"
hdr="$SOCKBUF_KMOD_CACHE/kselftest-hdr-$BASE_NAME"
# v4: the net fix's test is in selftests/cgroup (test_memcontrol), which
# selftest-guest.sh builds and runs; this install carries selftests/net.
tests=(tcp_sndbuf_expand)

rm -rf "$src"
cp -al "$base" "$src"
while read -r p; do
	(cd "$src" && patch -p1 -s <"$p")
done < <(series_patches)
for t in "${tests[@]}"; do
	[[ -e $src/tools/testing/selftests/net/$t.c ]] ||
		{ echo "kselftest: the series adds no net/$t.c" >&2; exit 1; }
done

if [[ ! -e $hdr/usr/include/asm/socket.h ]]; then
	mkdir -p "$hdr"
	make -s -C "$base" O="$hdr" headers_install INSTALL_HDR_PATH="$hdr/usr" >/dev/null
fi

rm -rf "$dest"
progs=()
for t in "${tests[@]}"; do
	progs+=("$src/tools/testing/selftests/net/$t")
done
# TEST_GEN_PROGS given on the command line is not prefixed with
# $(OUTPUT) by lib.mk, and the pattern rule wants that prefix: full
# paths. The other lists are emptied so that only the series' tests
# are built and installed.
make -s -C "$src/tools/testing/selftests" TARGETS=net \
	TEST_GEN_PROGS="${progs[*]}" TEST_PROGS= TEST_GEN_FILES= TEST_PROGS_EXTENDED= \
	TEST_GEN_PROGS_EXTENDED= TEST_FILES= KHDR_INCLUDES="-isystem $hdr/usr/include" \
	LDFLAGS=-static INSTALL_PATH="$dest" install >/dev/null
for t in "${tests[@]}"; do
	[[ -x $dest/net/$t ]] || { echo "kselftest: $dest/net/$t was not installed" >&2; exit 1; }
done

# Not part of the series: the project's probe of a forced 16 MB send
# buffer at 50/120/250 ms, carried in the same tree for the kmod guest
# (tests/kernels/guest/kmod-init.sh runs it when present).
mkdir -p "$dest/sockbuf"
gcc -Wall -Wextra -O2 -static -pthread -o "$dest/sockbuf/sndbuf_hold" \
	"$KMOD_DIR/kernel/sndbuf_hold.c"
rm -rf "$src"
echo "kselftest: $dest (run_kselftest.sh -t net:${tests[0]})"

#!/usr/bin/env bash
# w1.sh: the build checks of netdev's patchwork, for the objects the
# series touches: W=1 builds for x86_64 with gcc, i386 with gcc
# (ARCH=i386) and x86_64 with clang (LLVM=-19: 7.2 wants LLVM 17 or
# newer, Debian 12's clang 14 is too old; clang-19 and lld-19 come from
# Debian 12's own archive). Each is built unpatched, then with the whole
# series (net, net-next, sunrpc), and a warning the patched build prints
# that the unpatched one does not fails the check.
#
# Base: the first of base.env (7.2), as NIPA builds on net-next only.
# Config: make tinyconfig + kernel/guest.config + kernel/compile.config
# + kernel/w1.config (NFSD, so that svcsock.o is built as NFSD uses it).
# Trees, all in $SOCKBUF_KMOD_CACHE: w1-src-<base> (a hard-linked copy
# of the pristine tree, patched files replaced, never written through),
# w1-<base>-<toolchain> (the out dirs, kept: the second run reuses their
# prepared tree). Logs: w1-<base>-<toolchain>/w1-{base,series}.log.
#
# Run by `check.sh --w1`; alone: `nice -n 19 bash kmod-proposal/w1.sh`.
# Exit 0 no new warning, 1 a new warning or a failed build, 2 a missing
# tool or base.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

read -r -a bases <<<"$BASES"
ensure_base_package "${bases[0]}" || exit 2
base=$(pristine_base) || exit 2
for t in gcc clang-19 ld.lld-19 flex bison bc; do
	command -v "$t" >/dev/null || { echo "w1: $t is missing (clang-19 lld-19 llvm-19 flex bison bc)" >&2; exit 2; }
done
jobs=${SOCKBUF_KMOD_JOBS:-2}
src="$SOCKBUF_KMOD_CACHE/w1-src-$BASE_NAME"
mapfile -t patches < <(series_patches)

# The objects: every C file the series touches (selftests aside), and
# for a touched header the core objects that use what it changes.
mapfile -t objs < <({
	grep -h '^+++ b/.*\.c$' "${patches[@]}" | sed 's|^+++ b/||; s|\.c$|.o|' | grep -v '^tools/'
	grep -qh '^+++ b/include/net/sock\.h$' "${patches[@]}" &&
		printf '%s\n' net/core/sock.o net/core/stream.o net/ipv4/tcp.o
} | sort -u)

toolchains=(gcc-x86_64 gcc-i386 clang-x86_64)
fragments=("$KMOD_DIR/kernel/guest.config" "$KMOD_DIR/kernel/compile.config"
	"$KMOD_DIR/kernel/w1.config")
make_args() { # toolchain
	case $1 in
	gcc-x86_64) echo "ARCH=x86_64" ;;
	gcc-i386) echo "ARCH=i386" ;;
	clang-x86_64) echo "ARCH=x86_64 LLVM=-19" ;;
	esac
}

# warnings LOG: the warning lines, paths made relative and line and
# column numbers dropped, so that a patch's line shifts are not "new".
warnings() {
	grep -E '(warning|error):' "$1" | sed -E "s|$src/||g; s|^([^:]+):[0-9]+:[0-9]+:|\1:|" | sort
}

build() { # toolchain, label
	local out="$SOCKBUF_KMOD_CACHE/w1-$BASE_NAME-$1" args stamp opt t0=$SECONDS
	read -r -a args <<<"$(make_args "$1")"
	mkdir -p "$out"
	# Configured again whenever a config fragment changed.
	stamp=$(cat "${fragments[@]}" | md5sum)
	if [[ $(cat "$out/.configured" 2>/dev/null) != "$stamp" ]]; then
		make -s -C "$src" O="$out" "${args[@]}" tinyconfig >/dev/null
		"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
			"${fragments[@]}" >/dev/null
		make -s -C "$src" O="$out" "${args[@]}" olddefconfig >/dev/null
		# What the check is about must have survived olddefconfig.
		while read -r opt; do
			grep -qx "$opt" "$out/.config" ||
				{ echo "FAIL W=1 $1: $opt did not survive olddefconfig"; return 1; }
		done < <(grep -hE '^CONFIG_' "$KMOD_DIR/kernel/w1.config")
		echo "$stamp" >"$out/.configured"
	fi
	(cd "$out" && rm -f "${objs[@]}")
	if ! nice -n 19 make -C "$src" O="$out" "${args[@]}" -j"$jobs" W=1 "${objs[@]}" \
		>"$out/w1-$2.log" 2>&1; then
		echo "FAIL W=1 $1 $2: build failed ($out/w1-$2.log)"
		tail -20 "$out/w1-$2.log" | sed 's/^/     /'
		return 1
	fi
	echo "     W=1 $1 $2: $(warnings "$out/w1-$2.log" | wc -l) warnings, $((SECONDS - t0)) s"
}

start=$SECONDS
failed=0
echo "W=1 builds of ${objs[*]} on $BASE_PACKAGE $BASE_VERSION"
rm -rf "$src"
cp -al "$base" "$src"
for tc in "${toolchains[@]}"; do
	build "$tc" base || failed=1
done
# GNU patch writes a new file and renames it over the old one: the
# hard links to the pristine tree are replaced, never written through.
for p in "${patches[@]}"; do
	(cd "$src" && patch -p1 -s <"$p")
done
for tc in "${toolchains[@]}"; do
	out="$SOCKBUF_KMOD_CACHE/w1-$BASE_NAME-$tc"
	build "$tc" series || { failed=1; continue; }
	new=$(comm -13 <(warnings "$out/w1-base.log") <(warnings "$out/w1-series.log"))
	if [[ -n $new ]]; then
		echo "FAIL W=1 $tc: new warnings with the series"
		sed 's/^/     /' <<<"$new"
		failed=1
	else
		echo "ok   W=1 $tc: no new warning"
	fi
done
# The pristine tree is untouched (the hard links were broken, not used).
for p in "${patches[@]}"; do
	sed -n 's|^+++ b/||p' "$p"
done | sort -u | while read -r f; do
	[[ -e $base/$f ]] || continue
	if [[ $base/$f -ef $src/$f ]]; then
		echo "FAIL W=1: $f of the pristine tree was patched in place" >&2
		exit 1
	fi
done || failed=1
rm -rf "$src"
echo "W=1: $((SECONDS - start)) s, $([[ $failed == 0 ]] && echo passed || echo FAILED)"
exit "$failed"

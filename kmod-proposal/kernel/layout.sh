#!/usr/bin/env bash
# kernel/layout.sh [BASE...]: shows that the series leaves the layout of
# struct sock and struct tcp_sock as it was, on each base (default: every
# base of base.env).
#
# For each base, the pristine tree and the tree with the series (the
# trees kernel/build.sh makes) are configured alike (`make tinyconfig`
# plus guest.config), and the two objects that define and use the
# structures, net/core/sock.o and net/ipv4/tcp_input.o, are compiled
# with debug info (the guest config has none); `pahole -C` then prints
# both structures from each, and the two outputs must be identical.
#
# Needs pahole (Debian's dwarves) and what kernel/build.sh needs.  About
# two minutes per tree on one core.  Exit 0 when every base matches, 1
# when a layout differs (the diff is printed), 2 when a tool or base is
# missing.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

command -v pahole >/dev/null || { echo "layout: pahole not found (apt-get install dwarves)" >&2; exit 2; }
read -r -a all <<<"$BASES"
(($# > 0)) && all=("$@")

# Prints the directory of a configured tree with the structures' objects.
build_objects() {
	local src=$1 out=$2
	mkdir -p "$out"
	make -s -C "$src" O="$out" tinyconfig >/dev/null
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
		"$KMOD_DIR/kernel/guest.config" >/dev/null
	make -s -C "$src" O="$out" olddefconfig
	nice -n 15 make -C "$src" O="$out" -j2 KCFLAGS=-g \
		net/core/sock.o net/ipv4/tcp_input.o >"$out/layout.log" 2>&1 ||
		{ tail -20 "$out/layout.log" >&2; return 1; }
}

layouts() {
	pahole -C sock "$1/net/core/sock.o"
	pahole -C tcp_sock "$1/net/ipv4/tcp_input.o"
}

rc=0
for b in "${all[@]}"; do
	ensure_base_package "$b" || exit 2
	base=$(pristine_base) || exit 2
	src="$SOCKBUF_KMOD_CACHE/src-$BASE_NAME-patched"
	if [[ ! -e $src/.prepared ]]; then
		rm -rf "$src"
		cp -a "$base" "$src"
		while read -r p; do
			(cd "$src" && patch -p1 -s <"$p")
		done < <(series_patches)
		touch "$src/.prepared"
	fi
	stock="$SOCKBUF_KMOD_CACHE/layout-$BASE_NAME-stock"
	patched="$SOCKBUF_KMOD_CACHE/layout-$BASE_NAME-patched"
	build_objects "$base" "$stock" || exit 2
	build_objects "$src" "$patched" || exit 2
	if diff -u <(layouts "$stock") <(layouts "$patched"); then
		sizes=$(layouts "$stock" | grep -o 'size: [0-9]*, cachelines: [0-9]*' | paste -sd ';')
		echo "layout: $BASE_PACKAGE $BASE_VERSION: struct sock and struct tcp_sock unchanged ($sizes)"
	else
		echo "layout: $BASE_PACKAGE $BASE_VERSION: the series changes the layout (diff above)"
		rc=1
	fi
done
exit "$rc"

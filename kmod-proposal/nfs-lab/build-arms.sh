#!/usr/bin/env bash
# nfs-lab/build-arms.sh [ARM...]: the three kernels of the NFS experiment,
# from the same 7.2 source and the same configuration (make tinyconfig +
# kernel/guest.config + nfs-lab/nfs.config), differing only in patches:
#
#   stock   7.2.13 as Debian ships its source: NFSD's TCP sockets
#           autotuned, the send buffer capped at tcp_wmem[2]
#   net     + the net series alone (patches/net): the selftest guests'
#           "with the fix" kernel
#   locked  + lab-nfsd-locked.patch: NFSD's TCP data sockets sized and
#           locked as "[PATCH v2 8/8] sunrpc: Set explicit TCP socket
#           buffer sizes for NFSD" does (a reconstruction of its
#           behaviour; replace it with the posted patch, b4 am, before
#           the evidence run)
#   series  + the net fix, the net-next series and the SUNRPC RFC
#           (patches/net, patches/net-next, patches/sunrpc, in that order)
#
# One source tree and one object tree are shared: each arm reverts the
# previous arm's patches and applies its own, and make rebuilds only what
# they touched, so that the arms share every other object byte for byte.
# Output: $SOCKBUF_KMOD_CACHE/nfs-<arm>.bzImage and nfs-<arm>.patches (the
# sha256 of each patch applied). Default: all three, in that order.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
LAB=$KMOD_DIR/nfs-lab
base_vars 7.2 # the base series_patches() picks backports for

arm_patches() {
	case $1 in
	stock) ;;
	net) for p in "$KMOD_DIR"/patches/net/00[0-9][0-9]-*.patch; do
		[[ $p == */0000-* ]] || echo "$p"
	done ;;
	locked) echo "$LAB/lab-nfsd-locked.patch" ;;
	series) series_patches ;; # lib.sh: net, net-next, sunrpc, in order
	*) echo "build-arms: unknown arm '$1' (stock, net, locked, series)" >&2; return 2 ;;
	esac
}

arms=("$@")
((${#arms[@]})) || arms=(stock net locked series)
for arm in "${arms[@]}"; do arm_patches "$arm" >/dev/null || exit 2; done

ensure_base_package 7.2 || exit 2
base=$(pristine_base) || exit 2
src=$SOCKBUF_KMOD_CACHE/nfs-src
out=$SOCKBUF_KMOD_CACHE/nfs-build
applied=$src/.lab-applied   # copies of the patches now in $src, one per line
if [[ ! -e $src/.prepared ]]; then
	rm -rf "$src"
	cp -a "$base" "$src"
	: >"$applied"
	touch "$src/.prepared"
fi

mkdir -p "$out"
if [[ ! -e $out/.config ]]; then
	make -s -C "$src" O="$out" tinyconfig >/dev/null
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
		"$KMOD_DIR/kernel/guest.config" "$LAB/nfs.config" "$LAB/twoguest.config" >/dev/null
	make -s -C "$src" O="$out" olddefconfig
	while read -r opt; do
		grep -qx "$opt" "$out/.config" || { echo "build-arms: $opt did not survive olddefconfig" >&2; exit 1; }
	done < <(grep -hE "^CONFIG_" "$KMOD_DIR/kernel/guest.config" "$LAB/nfs.config" "$LAB/twoguest.config")
fi

for arm in "${arms[@]}"; do
	# Back to the pristine tree: every file the applied patches touch is
	# copied back from the base (or removed if they created it), then
	# this arm's patches go on.
	while read -r p; do
		grep -E '^(\+\+\+|---) [ab]/' "$p" | cut -d' ' -f2 | cut -d/ -f2- | sed 's/\t.*//'
	done <"$applied" | sort -u | while read -r f; do
		if [[ -e $base/$f ]]; then
			# A plain copy: a new mtime, so that make rebuilds it.
			cmp -s "$base/$f" "$src/$f" || cp "$base/$f" "$src/$f"
		else
			rm -f "$src/$f"
		fi
	done
	: >"$applied"
	# A copy of each patch is kept, so that the revert uses what was
	# applied even if the patch file has changed since.
	rm -rf "$src/.lab-applied.d"
	mkdir -p "$src/.lab-applied.d"
	while read -r p; do
		(cd "$src" && patch -p1 -s --no-backup-if-mismatch <"$p") ||
			{ echo "build-arms: $arm: $(basename "$p") does not apply" >&2; exit 1; }
		cp "$p" "$src/.lab-applied.d/"
		echo "$src/.lab-applied.d/$(basename "$p")" >>"$applied"
	done < <(arm_patches "$arm")
	echo "build-arms: $arm: $(wc -l <"$applied") patches, make -j2 bzImage ..."
	start=$SECONDS
	nice -n 19 make -C "$src" O="$out" -j2 bzImage >"$out/build-$arm.log" 2>&1 ||
		{ tail -20 "$out/build-$arm.log" >&2; exit 1; }
	cp "$out/arch/x86/boot/bzImage" "$SOCKBUF_KMOD_CACHE/nfs-$arm.bzImage"
	while read -r p; do sha256sum "$p"; done <"$applied" >"$SOCKBUF_KMOD_CACHE/nfs-$arm.patches"
	cp -r "$src/.lab-applied.d" "$SOCKBUF_KMOD_CACHE/nfs-$arm.patches.d"
	echo "build-arms: $arm: $((SECONDS - start)) s, $SOCKBUF_KMOD_CACHE/nfs-$arm.bzImage"
done

#!/usr/bin/env bash
# nfs-lab/build-arms.sh [--dry-run] [--force] [ARM...]: the kernels of the
# NFS experiment and of the selftest guests, from the same 7.2 source and
# the same configuration (make tinyconfig + kernel/guest.config +
# nfs-lab/nfs.config + nfs-lab/twoguest.config), differing only in
# patches:
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
# One source tree and one object tree are shared. Switching arms rewrites
# only the files whose content changes (each file any old or new patch
# touches is rebuilt from the pristine base plus the arm's patches in a
# scratch directory and copied over only if it differs), so that make
# recompiles what the switch really changed: net -> series recompiles
# tcp_input.c and what includes sunrpc/svc.h, not every includer of
# net/sock.h. The compiler runs through ccache when /usr/lib/ccache
# exists (cache $SOCKBUF_KMOD_CACHE/ccache, 8 GiB; the kernel's command
# lines stay those of plain gcc), so that going back to an arm built
# before costs the link only.
#
# An arm whose bzImage exists and was built from the same patches (sha256
# in nfs-<arm>.patches) and the same .config is skipped; --force rebuilds
# it. --dry-run checks that the configuration fragments survive, that
# every arm's patches apply to the base, and prints what would be built,
# then stops.
#
# Output: $SOCKBUF_KMOD_CACHE/nfs-<arm>.bzImage, nfs-<arm>.patches (the
# sha256 of each patch applied), nfs-<arm>.config, and nfs-<arm>.time (wall
# seconds, objects compiled, load average before and after). Progress: a
# line per minute with the objects compiled so far. Default: all four, in
# the order stock net series locked (net -> series is the cheapest switch).
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

# The files a patch touches (a/ and b/ names, /dev/null left out).
patch_files() {
	grep -E '^(\+\+\+|---) [ab]/' "$1" | cut -d' ' -f2 | cut -d/ -f2- | sed 's/\t.*//' | sort -u
}

dry_run=0 force=0
arms=()
for a in "$@"; do
	case $a in
	--dry-run) dry_run=1 ;;
	--force) force=1 ;;
	*) arms+=("$a") ;;
	esac
done
((${#arms[@]})) || arms=(stock net series locked)
for arm in "${arms[@]}"; do arm_patches "$arm" >/dev/null || exit 2; done

ensure_base_package 7.2 || exit 2
base=$(pristine_base) || exit 2
src=$SOCKBUF_KMOD_CACHE/nfs-src
out=$SOCKBUF_KMOD_CACHE/nfs-build
applied=$src/.lab-applied # copies of the patches now in $src, one per line
fragments=("$KMOD_DIR/kernel/guest.config" "$LAB/nfs.config" "$LAB/twoguest.config")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# stage ARM DIR FILE...: DIR gets FILE... as the base has them (those it
# has), with ARM's patches applied. 1 if a patch does not apply.
stage() {
	local arm=$1 dir=$2 f p
	shift 2
	rm -rf "$dir"
	mkdir -p "$dir"
	for f in "$@"; do
		[[ -e $base/$f ]] || continue
		mkdir -p "$dir/$(dirname "$f")"
		cp "$base/$f" "$dir/$f"
	done
	while read -r p; do
		(cd "$dir" && patch -p1 -s --no-backup-if-mismatch <"$p" >/dev/null) ||
			{ echo "build-arms: $arm: $(basename "$p") does not apply to $BASE_PACKAGE $BASE_VERSION" >&2; return 1; }
	done < <(arm_patches "$arm")
}

if ((dry_run)); then
	echo "build-arms: dry run: base $base"
	for arm in "${arms[@]}"; do
		mapfile -t files < <(arm_patches "$arm" | while read -r p; do patch_files "$p"; done | sort -u)
		stage "$arm" "$scratch/$arm" "${files[@]}" || exit 1
		state=build
		if [[ -e $SOCKBUF_KMOD_CACHE/nfs-$arm.bzImage && -e $SOCKBUF_KMOD_CACHE/nfs-$arm.patches ]] &&
			cmp -s <(arm_patches "$arm" | while read -r p; do sha256sum <"$p" | cut -d' ' -f1; done) \
				<(cut -d' ' -f1 "$SOCKBUF_KMOD_CACHE/nfs-$arm.patches"); then
			state="built (same patches; skipped unless --force)"
		fi
		echo "build-arms: dry run: $arm: $(arm_patches "$arm" | wc -l) patches apply, ${#files[@]} files: $state"
	done
	if [[ -e $out/.config ]]; then
		while read -r opt; do
			grep -qx "$opt" "$out/.config" || { echo "build-arms: dry run: $out/.config lacks $opt" >&2; exit 1; }
		done < <(grep -hE "^CONFIG_" "${fragments[@]}")
		echo "build-arms: dry run: $out/.config has every option of the fragments"
	else
		echo "build-arms: dry run: no $out/.config yet: the first arm configures and builds all 1,576 objects"
	fi
	exit 0
fi

if [[ ! -e $src/.prepared ]]; then
	rm -rf "$src"
	cp -a "$base" "$src"
	: >"$applied"
	touch "$src/.prepared"
fi

mkdir -p "$out"
if [[ ! -e $out/.config ]]; then
	make -s -C "$src" O="$out" tinyconfig >/dev/null
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}" >/dev/null
	make -s -C "$src" O="$out" olddefconfig
fi
while read -r opt; do
	grep -qx "$opt" "$out/.config" || { echo "build-arms: $opt is not in $out/.config (remove it to reconfigure)" >&2; exit 1; }
done < <(grep -hE "^CONFIG_" "${fragments[@]}")

# The compiler through ccache, by PATH: CC stays "gcc", so the command
# lines kbuild records do not change and no object is rebuilt for it.
if [[ -d /usr/lib/ccache ]] && command -v ccache >/dev/null; then
	export PATH=/usr/lib/ccache:$PATH CCACHE_DIR=${CCACHE_KERNEL_DIR:-$SOCKBUF_KMOD_CACHE/ccache}
	mkdir -p "$CCACHE_DIR"
	ccache -M 8G >/dev/null
fi

for arm in "${arms[@]}"; do
	img=$SOCKBUF_KMOD_CACHE/nfs-$arm.bzImage
	sums=$(arm_patches "$arm" | while read -r p; do sha256sum "$p"; done)
	if ((!force)) && [[ -e $img && -e $SOCKBUF_KMOD_CACHE/nfs-$arm.patches ]] &&
		[[ $(cut -d' ' -f1 <<<"$sums") == $(cut -d' ' -f1 "$SOCKBUF_KMOD_CACHE/nfs-$arm.patches") ]] &&
		cmp -s "$out/.config" "$SOCKBUF_KMOD_CACHE/nfs-$arm.config"; then
		echo "build-arms: $arm: $img is built from these patches and this .config, skipped (--force rebuilds)"
		continue
	fi
	# Every file the applied patches or this arm's touch, as this arm
	# wants it; copied into $src only where the content changes (a new
	# mtime only there, so make rebuilds only that).
	mapfile -t files < <({
		while read -r p; do patch_files "$p"; done <"$applied"
		arm_patches "$arm" | while read -r p; do patch_files "$p"; done
	} | sort -u)
	stage "$arm" "$scratch/stage" "${files[@]}" || exit 1
	changed=0
	for f in "${files[@]}"; do
		if [[ -e $scratch/stage/$f ]]; then
			cmp -s "$scratch/stage/$f" "$src/$f" && continue
			mkdir -p "$src/$(dirname "$f")"
			cp "$scratch/stage/$f" "$src/$f"
		else
			[[ -e $src/$f ]] || continue
			rm -f "$src/$f"
		fi
		changed=$((changed + 1))
	done
	# A copy of each patch is kept, so that the next switch knows what is
	# in $src even if the patch file has changed since.
	rm -rf "$src/.lab-applied.d"
	mkdir -p "$src/.lab-applied.d"
	: >"$applied"
	while read -r p; do
		cp "$p" "$src/.lab-applied.d/"
		echo "$src/.lab-applied.d/$(basename "$p")" >>"$applied"
	done < <(arm_patches "$arm")
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "build-arms: $arm: $(wc -l <"$applied") patches, $changed files changed in the tree," \
		"nice -n 19 make -j2 bzImage (load $load0) ..."
	log=$out/build-$arm.log
	start=$SECONDS
	nice -n 19 make -C "$src" O="$out" -j2 bzImage >"$log" 2>&1 &
	mpid=$!
	while kill -0 "$mpid" 2>/dev/null; do
		for ((i = 0; i < 60; i++)); do
			kill -0 "$mpid" 2>/dev/null || break
			sleep 1
		done
		kill -0 "$mpid" 2>/dev/null || break
		echo "build-arms: $arm: $(grep -c '^  CC ' "$log" || true) objects compiled," \
			"$(((SECONDS - start) / 60)) min, load $(cut -d' ' -f1 /proc/loadavg)"
	done
	wait "$mpid" || { tail -20 "$log" >&2; exit 1; }
	secs=$((SECONDS - start))
	cp "$out/arch/x86/boot/bzImage" "$img"
	cp "$out/.config" "$SOCKBUF_KMOD_CACHE/nfs-$arm.config"
	echo "$sums" | sed '/^$/d' >"$SOCKBUF_KMOD_CACHE/nfs-$arm.patches"
	rm -rf "$SOCKBUF_KMOD_CACHE/nfs-$arm.patches.d"
	cp -r "$src/.lab-applied.d" "$SOCKBUF_KMOD_CACHE/nfs-$arm.patches.d"
	hits=
	[[ -n ${CCACHE_DIR:-} ]] && hits=", ccache $(ccache -s 2>/dev/null | awk '/^  Hits:/ { print $2 "/" $4 }' | head -1) hits since its last zeroing"
	echo "$arm $secs s, $(grep -c '^  CC ' "$log" || true) objects compiled, load $load0 -> $(cut -d' ' -f1-3 /proc/loadavg)$hits" \
		>"$SOCKBUF_KMOD_CACHE/nfs-$arm.time"
	echo "build-arms: $arm: $secs s, $(grep -c '^  CC ' "$log" || true) objects compiled, $img"
done

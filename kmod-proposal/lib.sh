#!/usr/bin/env bash
# Shared by check.sh and kernel/build.sh: the bases, fetched and extracted
# once, and the series in the order it applies.
# shellcheck source=base.env
KMOD_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$KMOD_DIR/base.env"
: "${SOCKBUF_KMOD_CACHE:=/var/cache/sockbuf-kmod}"

# apt-get options of the private configuration for the base's suite: the
# system's sources are never read or changed, so a machine whose apt
# knows the release alone (debootstrap, the installer) fetches
# bookworm-security and sid all the same.
private_apt() {
	local root="$SOCKBUF_KMOD_CACHE/apt-$BASE_SUITE" mirror=$SOCKBUF_KMOD_MIRROR
	[[ $BASE_SUITE == *-security ]] && mirror=$SOCKBUF_KMOD_SECURITY_MIRROR
	mkdir -p "$root/lists/partial" "$root/cache/archives/partial"
	echo "deb $mirror $BASE_SUITE main" >"$root/sources.list"
	# Check-Valid-Until off: a frozen mirror or snapshot serves sid with
	# a Release file past its Valid-Until, which apt then refuses; the
	# signatures are still checked, and the pinned version is what the
	# checks use (an older Release can only lack it).
	APT_OPTS=(-o "Dir::Etc::sourcelist=$root/sources.list" -o Dir::Etc::sourceparts=-
		-o "Dir::State::Lists=$root/lists" -o "Dir::Cache=$root/cache"
		-o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false)
}

# Makes $BASE_TARBALL (the pinned version of the base's source package)
# available: downloaded from a private apt configuration and extracted
# into the cache, once.  Patches are proven against the pinned version
# alone.  0, or 2 with what failed on stderr.
ensure_base_package() {
	base_vars "${1:?base}" || return 2
	local debdir="$SOCKBUF_KMOD_CACHE/deb-$BASE_PACKAGE-$BASE_VERSION"
	BASE_TARBALL="$debdir/usr/src/$BASE_PACKAGE.tar.xz"
	[[ -e $debdir/.extracted ]] && return 0
	private_apt
	rm -rf "$debdir"
	mkdir -p "$debdir"
	if ! apt-get "${APT_OPTS[@]}" -qq update >/dev/null ||
		! (cd "$debdir" && apt-get "${APT_OPTS[@]}" -qq download \
			"$BASE_PACKAGE=$BASE_VERSION" >/dev/null); then
		echo "kmod: cannot fetch $BASE_PACKAGE $BASE_VERSION from $BASE_SUITE" \
			"(update base.env after rebasing the series)" >&2
		return 2
	fi
	if ! dpkg-deb -x "$debdir"/"${BASE_PACKAGE}"_*.deb "$debdir" || [[ ! -e $BASE_TARBALL ]]; then
		echo "kmod: cannot unpack $BASE_TARBALL from the $BASE_PACKAGE package" >&2
		rm -rf "$debdir"
		return 2
	fi
	touch "$debdir/.extracted"
}

# Prints the path of a pristine tree of the base ensure_base_package()
# selected, extracting it on first use; 2 with the reason on stderr when
# it cannot (a half-extracted tree is never kept).
pristine_base() {
	local dest="$SOCKBUF_KMOD_CACHE/pristine-$BASE_VERSION"
	if [[ ! -e $dest/.extracted ]]; then
		rm -rf "$dest"
		mkdir -p "$dest"
		if ! tar -C "$dest" -xf "$BASE_TARBALL"; then
			echo "kmod: cannot extract $BASE_TARBALL into $dest" >&2
			rm -rf "$dest"
			return 2
		fi
		touch "$dest/.extracted"
	fi
	echo "$dest/$BASE_DIR"
}

# The trees of the series in the order they apply: the net fix, the
# net-next series on top of it, the SUNRPC RFC on top of net-next.
SERIES_TREES="net net-next sunrpc"

# The patches of the selected base in the order they apply, cover letters
# left out (tree by tree, in SERIES_TREES order); on a base with
# BASE_FIXES_ONLY=1 (base.env) only those with a Fixes: tag. A patch in
# patches/backport-<base>/<tree>/ with the same name replaces the tree's
# one on that base.
series_patches() {
	local tree p alt
	for tree in $SERIES_TREES; do
		for p in "$KMOD_DIR/patches/$tree"/00[0-9][0-9]-*.patch; do
			[[ -e $p && $(basename "$p") != 0000-* ]] || continue
			# An older base takes what stable would: the fixes.
			[[ ${BASE_FIXES_ONLY:-0} == 1 ]] && ! grep -q '^Fixes:' "$p" && continue
			alt="$KMOD_DIR/patches/backport-$BASE_NAME/$tree/$(basename "$p")"
			[[ -e $alt ]] && p=$alt
			echo "$p"
		done
	done
}

#!/usr/bin/env bash
# Shared by check.sh and kernel/build.sh: the bases, fetched and extracted
# once, and the series in the order it applies.
# shellcheck source=base.env
KMOD_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$KMOD_DIR/base.env"
: "${SOCKBUF_KMOD_CACHE:=/var/cache/sockbuf-kmod}"

# apt-get options of the private configuration for a suite the system does
# not carry.
private_apt() {
	local root="$SOCKBUF_KMOD_CACHE/apt-$BASE_SUITE"
	mkdir -p "$root/lists/partial" "$root/cache/archives/partial"
	echo "deb $SOCKBUF_KMOD_MIRROR $BASE_SUITE main" >"$root/sources.list"
	APT_OPTS=(-o "Dir::Etc::sourcelist=$root/sources.list" -o Dir::Etc::sourceparts=-
		-o "Dir::State::Lists=$root/lists" -o "Dir::Cache=$root/cache"
		-o APT::Sandbox::User=root)
}

# Makes $BASE_TARBALL (the pinned version of the base's source package)
# available: installed with apt-get for a suite of the system (needs root),
# downloaded and extracted from a private apt configuration otherwise.
# Patches are proven against the pinned version alone.
ensure_base_package() {
	base_vars "${1:?base}" || return 2
	if [[ -n $BASE_SUITE ]]; then
		local debdir="$SOCKBUF_KMOD_CACHE/deb-$BASE_PACKAGE-$BASE_VERSION"
		BASE_TARBALL="$debdir/usr/src/$BASE_PACKAGE.tar.xz"
		[[ -e $BASE_TARBALL ]] && return 0
		private_apt
		mkdir -p "$debdir"
		if ! apt-get "${APT_OPTS[@]}" -qq update >/dev/null ||
			! (cd "$debdir" && apt-get "${APT_OPTS[@]}" -qq download \
				"$BASE_PACKAGE=$BASE_VERSION" >/dev/null); then
			echo "kmod: cannot fetch $BASE_PACKAGE $BASE_VERSION from $BASE_SUITE" \
				"(update base.env after rebasing the series)" >&2
			return 2
		fi
		dpkg-deb -x "$debdir"/"${BASE_PACKAGE}"_*.deb "$debdir"
		return 0
	fi
	BASE_TARBALL=/usr/src/$BASE_PACKAGE.tar.xz
	if ! dpkg-query -W -f='${Status}' "$BASE_PACKAGE" 2>/dev/null | grep -q "install ok installed"; then
		if [[ $(id -u) != 0 ]]; then
			echo "kmod: $BASE_PACKAGE is not installed; run as root to install it" >&2
			return 2
		fi
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			"$BASE_PACKAGE" >/dev/null
	fi
	local have
	have=$(dpkg-query -W -f='${Version}' "$BASE_PACKAGE")
	if [[ $have != "$BASE_VERSION" ]]; then
		echo "kmod: $BASE_PACKAGE is $have, the series is pinned to $BASE_VERSION" \
			"(update base.env after rebasing the series)" >&2
		return 2
	fi
}

# Prints the path of a pristine tree of the base ensure_base_package()
# selected, extracting it on first use.
pristine_base() {
	local dest="$SOCKBUF_KMOD_CACHE/pristine-$BASE_VERSION"
	if [[ ! -e $dest/.extracted ]]; then
		rm -rf "$dest"
		mkdir -p "$dest"
		tar -C "$dest" -xf "$BASE_TARBALL"
		touch "$dest/.extracted"
	fi
	echo "$dest/$BASE_DIR"
}

# The patches of the selected base in the order they apply, cover letters
# left out: the net-next series, then the SUNRPC one (its prerequisite
# first). A patch in patches/backport-<base>/<tree>/ with the same name
# replaces the net-next one on that base.
series_patches() {
	local tree p alt
	for tree in net-next sunrpc; do
		for p in "$KMOD_DIR/patches/$tree"/00[0-9][0-9]-*.patch; do
			[[ -e $p && $(basename "$p") != 0000-* ]] || continue
			alt="$KMOD_DIR/patches/backport-$BASE_NAME/$tree/$(basename "$p")"
			[[ -e $alt ]] && p=$alt
			echo "$p"
		done
	done
}

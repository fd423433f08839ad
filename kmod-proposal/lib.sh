#!/usr/bin/env bash
# Shared by check.sh and kernel/build.sh: the pinned base, extracted once.
# shellcheck source=base.env
KMOD_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$KMOD_DIR/base.env"
: "${SOCKBUF_KMOD_CACHE:=/var/cache/sockbuf-kmod}"

# Installs the base package when missing (needs root) and checks that the
# installed one is the pinned version: patches are proven against it alone.
ensure_base_package() {
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

# Prints the path of a pristine base tree, extracting it on first use.
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

# The series in order, cover letter left out.
series_patches() {
	find "$KMOD_DIR/patches" -name '00[0-9][0-9]-*.patch' ! -name '0000-*' | sort
}

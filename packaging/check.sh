#!/usr/bin/env bash
# check.sh [BUILD_DIR]: build the Debian packages (build.sh), check them with
# lintian (errors fail, warnings are printed; docs/packaging.md lists the
# known ones), check the library's exports against the symbols file, then
# install the packages into a clean Debian root and build and run the
# installed-consumer test (tests/install/consumer) against them there.
#
# The clean root: a debootstrap minbase of the running suite, made once and
# cached in $SOCKBUF_PKG_BASE (default /var/tmp/sockbuf-<suite>-minbase),
# used read-only under an overlay (or copied) so every run starts from the
# same state.
# Needs root (debootstrap, mounts, chroot); exit 77 when not root.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$top/build-pkg}")
debs=$build/debs
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
base=${SOCKBUF_PKG_BASE:-/var/tmp/sockbuf-$suite-minbase}
step() { echo "== packages: $1"; }

if [[ $(id -u) != 0 ]]; then
	echo "packages: skipped: needs root (debootstrap, overlay mount, chroot)"
	exit 77
fi

step "build"
rm -rf "$debs"
bash "$top/packaging/build.sh" "$build" "$debs" >/dev/null
ls -l "$debs"

step "versions"
# The packages, the tools in them and the changelog: NEWS.md's version.
bash "$top/tests/release/check_versions.sh" "$top/NEWS.md" "$top/packaging/changelog-from-news.py" \
	"$build/bin/sockbuf" "$build/bin/sockbuf-contract" "$debs"/*.deb

step "lintian"
# --fail-on error: warnings are reported, not fatal.
lintian --fail-on error --tag-display-limit 0 "$debs"/*.deb

step "exported symbols = packaging/symbols"
# Every defined dynamic symbol, weak and unique ones included, must be a
# versioned sockbuf_ function of the header and the symbols file
# (tests/abi); then dpkg-gensymbols, as a Debian build would run it.
dpkg-deb --fsys-tarfile "$debs"/libsockbuf0_*.deb |
	tar -xO --wildcards './usr/lib/*/libsockbuf.so.0.*' >"$build/libsockbuf.so"
bash "$top/tests/abi/check_exports.sh" "$build/libsockbuf.so" "$top/api/sockbuf/sockbuf.h" \
	"$top/impl/libsockbuf.map" "$top/packaging/symbols"
version=$(python3 "$top/packaging/changelog-from-news.py" --version "$top/NEWS.md")
dpkg-gensymbols -q -plibsockbuf0 -v"$version" -c4 -I"$top/packaging/symbols" \
	-e"$build/libsockbuf.so" -O"$build/libsockbuf0.symbols"

step "clean root ($base)"
if [[ ! -f $base/.complete ]]; then
	# The mirror apt already uses, from whichever layout it has (deb822
	# .sources, sources.list, sources.list.d/*.list); the lookup names
	# what it looked for when there is none.
	mirror=$(python3 "$top/tests/kernels/kmatrix/fetch.py" mirror) ||
		{ echo "packages: no Debian mirror for debootstrap (see above)" >&2; exit 1; }
	rm -rf "$base"
	mkdir -p "$base"
	debootstrap --variant=minbase "$suite" "$base" "$mirror" >"$base.log" 2>&1 || {
		tail -n 20 "$base.log" >&2
		echo "packages: debootstrap $suite from $mirror failed (the lines above; $base.log)" >&2
		exit 1
	}
	touch "$base/.complete"
fi
run=$(mktemp -d /var/tmp/sockbuf-pkgroot.XXXXXX)
root=$run/root
mkdir -p "$run/upper" "$run/work" "$root"
cleanup() {
	local m
	for m in "$root/proc" "$root"; do
		if mountpoint -q "$m"; then umount -l "$m"; fi
	done
	rm -rf "$run"
}
trap cleanup EXIT
# An overlay keeps the cached root untouched; where overlayfs cannot be
# mounted (some containers), a copy does the same, a few seconds slower.
if ! mount -t overlay overlay -o "lowerdir=$base,upperdir=$run/upper,workdir=$run/work" \
	"$root" 2>/dev/null; then
	echo "packages: no overlay mount here; copying the root"
	cp -a "$base/." "$root/"
fi
mount -t proc proc "$root/proc"
# The host's resolver where it has one (debootstrap copied one into the
# base already).
if [[ -e /etc/resolv.conf ]]; then cp -L /etc/resolv.conf "$root/etc/resolv.conf"; fi
mkdir -p "$root/tmp/debs" "$root/tmp/consumer"
cp "$debs"/*.deb "$root/tmp/debs/"
cp -r "$top/tests/install/consumer/." "$root/tmp/consumer/"
# No terminal in the root: dpkg must not ask for one.
in_root() {
	chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		PATH=/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -ec "$1"
}

step "install the packages (apt resolves their Depends)"
in_root 'apt-get update -qq
apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends /tmp/debs/*.deb >/dev/null
dpkg-query -W libsockbuf0 libsockbuf-dev sockbuf-tools
ldconfig -p | grep -q "libsockbuf.so.0 " || { echo "libsockbuf.so.0 not in the ldconfig cache"; exit 1; }
sockbuf probe >/dev/null
sockbuf-contract --list >/dev/null
dpkg -L sockbuf-tools | grep -q "/sockbuf/libsockbuf-shim.so$" ||
	{ echo "sockbuf-tools does not ship libsockbuf-shim.so"; exit 1; }
sockbuf run --policy initial -- /bin/true
if dpkg -L sockbuf-tools | grep -q "/sbin/sockbufd$"; then
	sockbufd --version >/dev/null
	dpkg -L sockbuf-tools | grep -q "/systemd/system/sockbufd.service$" ||
		{ echo "sockbuf-tools ships sockbufd without its unit"; exit 1; }
	grep -q "^ExecStart=/usr/sbin/sockbufd " /lib/systemd/system/sockbufd.service ||
		{ echo "the unit does not start /usr/sbin/sockbufd"; exit 1; }
fi
test -f /usr/share/man/man3/sockbuf_set_initial_bufsize.3.gz ||
	{ echo "man page sockbuf_set_initial_bufsize(3) not installed"; exit 1; }
echo "tools run from /usr/bin"'

step "build the installed-consumer test against the packages"
in_root 'apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends cmake g++ make >/dev/null
cmake -S /tmp/consumer -B /tmp/consumer-build >/dev/null
cmake --build /tmp/consumer-build >/dev/null
for exe in consumer_cmake consumer_static consumer_pkgconfig; do
	/tmp/consumer-build/$exe || { echo "$exe failed"; exit 1; }
done
ldd /tmp/consumer-build/consumer_cmake | grep -Eq "libsockbuf.so.0 => (/usr)?/lib/" ||
	{ echo "consumer_cmake does not load the packaged libsockbuf.so.0"; exit 1; }'

step "ok"

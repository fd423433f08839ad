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
# The maintainer scripts act on the unit only where systemd runs
# (/run/systemd/system).  The root has no systemd: a stand-in systemctl
# logs what the scripts, deb-systemd-helper and deb-systemd-invoke ask of
# it, so the log shows the daemon-reload, start and stop a real host
# would get.  Where systemctl exists, deb-systemd-helper enables through
# `systemctl preset`: the stand-in makes the unit's WantedBy= links, as
# Debian's default preset policy (enable) does; is-enabled answers from
# those links.
dpkg-deb -c "$debs"/sockbuf-tools_*.deb >"$run/tools.list"
daemon=0
if grep -q '/sbin/sockbufd$' "$run/tools.list"; then daemon=1; fi
if ((daemon)); then
	[[ ! -e $root/usr/bin/systemctl ]] || { echo "packages: the clean root has a systemctl" >&2; exit 1; }
	mkdir -p "$root/run/systemd/system"
	cat >"$root/usr/bin/systemctl" <<'EOF'
#!/bin/sh
echo "systemctl $*" >>/tmp/systemctl.log
for unit in "$@"; do :; done
case " $* " in
*" preset "*)
	for target in $(sed -n 's/^WantedBy=//p' "/lib/systemd/system/$unit"); do
		mkdir -p "/etc/systemd/system/$target.wants"
		ln -sf "/lib/systemd/system/$unit" "/etc/systemd/system/$target.wants/$unit"
	done ;;
*" is-enabled "*)
	if [ -L /etc/systemd/system/multi-user.target.wants/sockbufd.service ]; then
		echo enabled
	else
		echo disabled; exit 1
	fi ;;
*" is-active "*) exit 3 ;;
esac
exit 0
EOF
	chmod 755 "$root/usr/bin/systemctl"
fi
# The package carries the bash completion its install rules name.
completion=0
if grep -qs 'bash-completion' "$top/tools/cli/CMakeLists.txt"; then completion=1; fi

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
test -f /usr/share/doc/sockbuf-tools/shim.md.gz ||
	{ echo "sockbuf-tools does not ship the shim document sockbuf(1) names"; exit 1; }
if (('"$completion"')); then
	dpkg -L sockbuf-tools | grep -q "^/usr/share/bash-completion/completions/." ||
		{ echo "sockbuf-tools does not ship the bash completion"; exit 1; }
fi
if (('"$daemon"')); then
	sockbufd --version >/dev/null
	unit=/lib/systemd/system/sockbufd.service
	dpkg -L sockbuf-tools | grep -qx "$unit" ||
		{ echo "sockbuf-tools ships sockbufd without its unit in /lib/systemd/system"; exit 1; }
	grep -qx "ExecStart=/usr/sbin/sockbufd --metrics-file /run/sockbufd/metrics.prom \$SOCKBUFD_OPTS" "$unit" ||
		{ echo "the unit does not start /usr/sbin/sockbufd with \$SOCKBUFD_OPTS"; exit 1; }
	grep -qx "EnvironmentFile=-/etc/default/sockbufd" "$unit" ||
		{ echo "the unit does not read /etc/default/sockbufd"; exit 1; }
	grep -q "^SOCKBUFD_OPTS=" /etc/default/sockbufd ||
		{ echo "no SOCKBUFD_OPTS in /etc/default/sockbufd"; exit 1; }
	dpkg-query -W -f="\${Conffiles}\n" sockbuf-tools | grep -q "^ /etc/default/sockbufd " ||
		{ echo "/etc/default/sockbufd is not a conffile"; exit 1; }
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

if ((daemon)); then
	step "sockbufd.service: installed, enabled by the administrator, removed, purged"
	# The installation (step above): the postinst enabled the unit
	# (deb-systemd-helper, its state recorded), then asked systemd for a
	# daemon-reload and a start.  The administrator's later `systemctl
	# enable sockbufd` makes the same link (by hand here: no systemd in
	# the root).  Removal stops the daemon and keeps the conffile; purge
	# leaves nothing of the unit.  Every check runs; each failure is said.
	in_root 'fail=0
bad() { echo "FAIL: $*"; fail=1; }
unit=/lib/systemd/system/sockbufd.service
wants=/etc/systemd/system/multi-user.target.wants/sockbufd.service
test "$(readlink "$wants")" = "$unit" || bad "installation did not enable sockbufd.service"
test -e /var/lib/systemd/deb-systemd-helper-enabled/sockbufd.service.dsh-also ||
	bad "installation left no deb-systemd-helper state for sockbufd.service"
grep -qx "systemctl --system daemon-reload" /tmp/systemctl.log ||
	bad "installation did not reload systemd"
grep -qx "systemctl --quiet --system start sockbufd.service" /tmp/systemctl.log ||
	bad "installation did not start sockbufd"
echo "systemctl calls at installation:"; sed "s/^/  /" /tmp/systemctl.log
rm -f "$wants"
mkdir -p "${wants%/*}"
ln -s "$unit" "$wants"
: >/tmp/systemctl.log
dpkg --remove sockbuf-tools >/dev/null
grep -qx "systemctl stop sockbufd.service" /tmp/systemctl.log || bad "removal did not stop sockbufd"
grep -qx "systemctl --system daemon-reload" /tmp/systemctl.log || bad "removal did not reload systemd"
echo "systemctl calls at removal:"; sed "s/^/  /" /tmp/systemctl.log
test -f /etc/default/sockbufd || bad "removal deleted the conffile /etc/default/sockbufd"
dpkg --purge sockbuf-tools >/dev/null
left=$(find /etc /var/lib/systemd /lib/systemd /usr/lib/systemd -name "*sockbufd*" 2>/dev/null || true)
test -z "$left" || bad "left after purge:" $left
dangling=$(find /etc/systemd -xtype l 2>/dev/null || true)
test -z "$dangling" || bad "dangling links after purge:" $dangling
test "$fail" = 0 || exit 1
echo "purge left nothing of sockbufd.service"'
fi

step "ok"

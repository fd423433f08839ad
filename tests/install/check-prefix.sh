#!/usr/bin/env bash
# check-prefix.sh BUILD_DIR: `cmake --install BUILD_DIR --prefix DIR`, DIR
# not the configured prefix, writes nothing outside DIR (installed under a
# DESTDIR, where every file must land below DESTDIR/DIR), and the unit it
# installs, DIR/lib/systemd/system/sockbufd.service, starts DIR's sockbufd
# with the options of DIR's etc/default/sockbufd and passes
# `systemd-analyze verify`.  Exit 77 when sockbufd is not built (no unit)
# or systemd-analyze is missing, after the prefix check.
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
prefix=$work/prefix
[[ $prefix != "$configured" ]] || { echo "FAIL: scratch prefix is the configured one"; exit 1; }

dest=$work/dest
DESTDIR=$dest cmake --install "$build" --prefix "$prefix" >"$work/install.log"
outside=$(find "$dest" -mindepth 1 \( -type f -o -type l \) ! -path "$dest$prefix/*")
if [[ -n $outside ]]; then
	echo "FAIL: cmake --install --prefix $prefix wrote outside it (configured: $configured):"
	echo "${outside//$dest/}"
	exit 1
fi
n=$(find "$dest$prefix" \( -type f -o -type l \) | wc -l)
echo "ok: $n files, all under the prefix (configured: $configured)"

# Installed for real, so that the paths the unit names exist.
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
unit=$prefix/lib/systemd/system/sockbufd.service
if [[ ! -x $prefix/sbin/sockbufd ]]; then
	[[ ! -e $unit ]] || { echo "FAIL: a unit without sockbufd"; exit 1; }
	echo "SKIP: sockbufd not built (no prometheus-cpp): no unit to check"
	exit 77
fi
[[ -f $unit ]] || { echo "FAIL: no unit at $unit"; exit 1; }
fail=0
want="ExecStart=$prefix/sbin/sockbufd --metrics-file /run/sockbufd/metrics.prom \$SOCKBUFD_OPTS"
grep -qxF "$want" "$unit" ||
	{ echo "FAIL: want '$want', the unit has: $(grep '^ExecStart=' "$unit")"; fail=1; }
want="EnvironmentFile=-$prefix/etc/default/sockbufd"
grep -qxF "$want" "$unit" ||
	{ echo "FAIL: want '$want', the unit has: $(grep '^EnvironmentFile=' "$unit" || echo none)"; fail=1; }
grep -q '^SOCKBUFD_OPTS=' "$prefix/etc/default/sockbufd" ||
	{ echo "FAIL: no SOCKBUFD_OPTS in $prefix/etc/default/sockbufd"; fail=1; }
# The copy in the build tree (tests/daemon's) still names the configured
# prefix.
grep -q "^ExecStart=$configured/sbin/sockbufd " "$build/tools/daemon/sockbufd.service" ||
	{ echo "FAIL: the build tree's unit does not name $configured/sbin/sockbufd"; fail=1; }

if ! command -v systemd-analyze >/dev/null; then
	echo "SKIP: no systemd-analyze (package systemd): unit not verified"
	exit $((fail ? 1 : 77))
fi
# --man=no: the man page is not in man's path from a scratch prefix.
if out=$(systemd-analyze verify --man=no "$unit" 2>&1); then
	echo "ok: systemd-analyze verify $unit${out:+ (said: $out)}"
else
	echo "FAIL: systemd-analyze verify:"
	echo "$out"
	fail=1
fi
exit $fail

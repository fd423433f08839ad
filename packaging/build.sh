#!/usr/bin/env bash
# build.sh BUILD_DIR OUT_DIR: configure a /usr build with Debian's hardening
# flags, build what the packages hold, and write the .deb files to OUT_DIR.
set -euo pipefail
build=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
# CMake has no CPPFLAGS: Debian's preprocessor flags go with the compiler's.
export CFLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS)"
export CXXFLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CXXFLAGS)"
export LDFLAGS="$(dpkg-buildflags --get LDFLAGS)"
# sockbuf-contract sits with the tests (tests/contract), so tests are
# configured; only the packaged targets are built.  SOCKBUF_PACKAGE_DEB:
# the unit in systemd's directory (systemd.pc), /etc for the conffile
# (said again here: a build directory configured before keeps its cache).
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
	-DCMAKE_INSTALL_SYSCONFDIR=/etc \
	-DSOCKBUF_PACKAGE_DEB=ON -DSOCKBUF_BUILD_BENCH=OFF -DSOCKBUF_BUILD_EXAMPLES=OFF \
	-DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
targets=(sockbuf sockbuf_static sockbuf_cli sockbuf_contract sockbuf_shim)
# The host daemon where its libraries are present (tools/daemon).
if grep -q '^SOCKBUF_HAVE_DAEMON:INTERNAL=ON' "$build/CMakeCache.txt"; then
	targets+=(sockbufd)
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
mkdir -p "$out"
(cd "$build" && cpack -G DEB -B "$out" >/dev/null)
rm -rf "$out/_CPack_Packages"
ls "$out"/*.deb

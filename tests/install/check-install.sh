#!/usr/bin/env bash
# check-install.sh BUILD_DIR: install the built project into a scratch
# prefix, then build and run a consumer through find_package(sockbuf) and
# through pkg-config, and check the SONAME, the symbol version a consumer
# records, and the man pages.
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(find "$prefix" -name 'libsockbuf.so.*.*' | head -1)
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[[ $soname == libsockbuf.so.0 ]] || { echo "bad SONAME '$soname'"; exit 1; }
[[ -f $prefix/share/man/man3/sockbuf_set_initial_bufsize.3 ]] || { echo "man page not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name sockbuf.pc)")
cmake -S "$here/consumer" -B "$work/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/b" >/dev/null
# A program linked against the library asks for its calls by version
# (impl/libsockbuf.map), which the loader checks at start.
objdump -T "$work/b/consumer_cmake" | grep -Eq '\(SOCKBUF_0\) +sockbuf_set_initial_bufsize$' ||
	{ echo "consumer_cmake does not ask for sockbuf_set_initial_bufsize@SOCKBUF_0"; exit 1; }
export LD_LIBRARY_PATH=$(dirname "$lib")
for exe in consumer_cmake consumer_static consumer_pkgconfig; do
	"$work/b/$exe"
done
echo "install: ok ($soname, find_package, pkg-config, static)"

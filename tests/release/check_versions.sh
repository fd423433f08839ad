#!/bin/bash
# SPDX-License-Identifier: MIT
# One version everywhere: NEWS.md's newest section, the Debian changelog
# made from it, `sockbuf --version`, `sockbuf-contract --version` (each
# with the library it loaded) and, when given, the packages' names.
#   check_versions.sh NEWS.md CHANGELOG_SCRIPT SOCKBUF SOCKBUF_CONTRACT [DEB...]
set -euo pipefail
news=$1 script=$2 cli=$3 contract=$4
shift 4
fail() { echo "versions: $*" >&2; exit 1; }
want=$(python3 "$script" --version "$news") || fail "NEWS.md has no version section"
top=$(python3 "$script" "$news" | sed -n '1s/^sockbuf (\([^)]*\)).*/\1/p')
[[ $top == "$want" ]] || fail "the changelog's first entry is $top, NEWS.md says $want"
for tool in "$cli" "$contract"; do
	name=$(basename "$tool")
	line=$("$tool" --version) || fail "$name --version failed"
	[[ $line == "$name $want (libsockbuf $want)" ]] ||
		fail "$name --version says '$line', NEWS.md says $want"
done
for deb in "$@"; do
	v=$(dpkg-deb -f "$deb" Version)
	[[ $v == "$want" ]] || fail "$(basename "$deb") is version $v, NEWS.md says $want"
done
echo "versions: $want everywhere ($# packages)"

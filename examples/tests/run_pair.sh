#!/bin/sh
# SPDX-License-Identifier: MIT
# run_pair.sh SERVER CLIENT [server args] -- [client args]
# Starts SERVER on 127.0.0.1 port 0 for one client session, reads the port
# from its first line, runs CLIENT against it and checks that both exit 0
# and that both report zero failed verifications.  Every wait is bounded.
set -eu
server=$1; client=$2; shift 2
sargs=""; while [ $# -gt 0 ] && [ "$1" != "--" ]; do sargs="$sargs $1"; shift; done
[ $# -gt 0 ] && shift
dir=$(mktemp -d); trap 'rm -rf "$dir"; [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null; true' EXIT
mkfifo "$dir/out"
case "$sargs" in *--max-clients*) ;; *) sargs="$sargs --max-clients=1" ;; esac
# shellcheck disable=SC2086
"$server" --listen=127.0.0.1:0 --seconds=50 $sargs >"$dir/out" &
spid=$!
exec 3<"$dir/out"
read -r line <&3 || { echo "server printed nothing"; exit 1; }
echo "$line"
port=$(echo "$line" | sed -n 's/.* listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p')
[ -n "$port" ] || { echo "no port in: $line"; exit 1; }
crc=0
"$client" --connect=127.0.0.1:"$port" "$@" >"$dir/client" 2>&1 || crc=$?
cat "$dir/client"
cat <&3 >"$dir/server" || true
src=0; wait "$spid" || src=$?; spid=""
cat "$dir/server"
[ "$crc" -eq 0 ] || { echo "client exit $crc"; exit 1; }
[ "$src" -eq 0 ] || { echo "server exit $src"; exit 1; }
grep -q ' 0 failed verification' "$dir/client" || { echo "client verification"; exit 1; }
grep -q ' 0 failed verification' "$dir/server" || { echo "server verification"; exit 1; }
grep -Eq '(calls|requests), 0 failed' "$dir/server" && ! grep -Eq ' 0 (calls|requests),' "$dir/server" \
	|| { echo "server served nothing"; exit 1; }
echo "PASS"

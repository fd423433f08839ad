#!/bin/sh
# `sockbuf run`: finds the shim next to itself, sets LD_PRELOAD and
# SOCKBUF_SHIM, keeps an existing LD_PRELOAD, refuses a bad configuration.
# usage: run_checks.sh SOCKBUF SHIM_CHILD
set -u
sockbuf=$1 child=$2
failures=0
expect() { # NAME WANT OUTPUT
	case "$3" in
	*"$2"*) echo "ok: $1: $3" ;;
	*) echo "FAIL: $1: got '$3', want '$2'"; failures=$((failures + 1)) ;;
	esac
}

expect "default policy" "shim=1 lock=0 rcvbuf=131072" "$("$sockbuf" run -- "$child")"
expect "policy lock" "shim=1 lock=2" "$("$sockbuf" run --policy lock -- "$child")"
expect "without --" "shim=1 lock=0" "$("$sockbuf" run "$child")"
expect "extra config" "shim=1 lock=2" \
	"$("$sockbuf" run --config policy:passthrough -- "$child")"
expect "--reserve" "SOCKBUF_SHIM=policy:initial,reserve:on" \
	"$("$sockbuf" run --reserve -- env | grep '^SOCKBUF_SHIM=')"
shim_dir=$(readlink -f "$(dirname "$(readlink -f "$sockbuf")")/../lib")
expect "keeps LD_PRELOAD, shim first" "preload=$shim_dir/libsockbuf-shim.so:libm.so.6" \
	"$(LD_PRELOAD=libm.so.6 "$sockbuf" run -- "$child")"
expect "bad policy refused" "bad configuration: item 1 'policy:bogus'" \
	"$("$sockbuf" run --policy bogus -- "$child" 2>&1; echo " rc=$?")"
expect "bad policy exit 2" "rc=2" "$("$sockbuf" run --policy bogus -- "$child" 2>/dev/null; echo " rc=$?")"
expect "missing command" "rc=127" "$("$sockbuf" run -- /nonexistent/cmd 2>/dev/null; echo " rc=$?")"
expect "shim not found" "cannot find libsockbuf-shim.so" \
	"$(SOCKBUF_SHIM_PATH=/nonexistent/libsockbuf-shim.so "$sockbuf" run -- "$child" 2>&1)"
[ "$failures" -eq 0 ]

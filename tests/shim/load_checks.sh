#!/bin/sh
# Load-time behaviour of libsockbuf-shim.so, seen from outside:
#  - only the interposed symbols are exported, no C++ static constructors;
#  - a bad configuration gives one warning line and plain libc behaviour;
#  - the configuration file, then SOCKBUF_SHIM on top;
#  - secure execution (a setgid copy of a program linked with the shim)
#    keeps the shim inactive.
# usage: load_checks.sh SHIM_SO SHIM_CHILD SHIM_CHILD_LINKED WORKDIR
set -u
shim=$1 child=$2 linked=$3 work=$4
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

exports=$(nm -D --defined-only "$shim" | awk '{print $3}' | sort | tr '\n' ' ')
want="accept accept4 connect getsockopt listen setsockopt "
[ "$exports" = "$want" ] && ok "exports: $exports" || fail "exports '$exports', want '$want'"

# No C++ dynamic initialisers: the only load-time code is the shim's own
# constructor (configuration, probe).
if nm "$shim" | grep -q "_GLOBAL__sub_I"; then
	fail "static constructors in the shim: $(nm -C "$shim" | grep _GLOBAL__sub_I)"
else
	ok "no C++ static constructors"
fi

# expect_child NAME WANT_STDOUT_SUBSTRING WANT_STDERR_LINES [env...]
expect_child() {
	name=$1 want=$2 lines=$3
	shift 3
	out=$(env "$@" "$child" 2>"$work/stderr.txt")
	n=$(wc -l <"$work/stderr.txt")
	case "$out" in
	*"$want"*) ok "$name: $out" ;;
	*) fail "$name: got '$out', want '$want'" ;;
	esac
	[ "$n" -eq "$lines" ] || fail "$name: $n stderr lines, want $lines: $(cat "$work/stderr.txt")"
	if [ "$lines" -eq 1 ] && ! grep -q "inactive" "$work/stderr.txt"; then
		fail "$name: warning does not say the shim is inactive"
	fi
}

expect_child "initial" "shim=1 lock=0 rcvbuf=131072" 0 LD_PRELOAD="$shim" SOCKBUF_SHIM=policy:initial
expect_child "unset means initial" "shim=1 lock=0" 0 LD_PRELOAD="$shim" SOCKBUF_SHIM_CONF=/dev/null
expect_child "bad policy" "shim=1 lock=2 rcvbuf=131072" 1 LD_PRELOAD="$shim" SOCKBUF_SHIM=policy:bogus
expect_child "bad size" "shim=1 lock=2" 1 LD_PRELOAD="$shim" SOCKBUF_SHIM=default_rcv:12Q
expect_child "missing named file" "shim=1 lock=2" 1 LD_PRELOAD="$shim" \
	SOCKBUF_SHIM_CONF="$work/no-such-file.conf" SOCKBUF_SHIM=policy:initial

printf '# test\npolicy:passthrough\n' >"$work/shim.conf"
expect_child "file alone" "shim=1 lock=2" 0 LD_PRELOAD="$shim" SOCKBUF_SHIM_CONF="$work/shim.conf"
expect_child "env after file" "shim=1 lock=0" 0 LD_PRELOAD="$shim" \
	SOCKBUF_SHIM_CONF="$work/shim.conf" SOCKBUF_SHIM=policy:initial
printf 'policy:initial\nbogus\n' >"$work/bad.conf"
expect_child "bad file" "shim=1 lock=2" 1 LD_PRELOAD="$shim" SOCKBUF_SHIM_CONF="$work/bad.conf"

# Secure execution: a setgid copy.  Needs root (to give the file a group
# we are not in) and a filesystem without nosuid.
skipped=""
out=$(SOCKBUF_SHIM=policy:initial "$linked")
case "$out" in
*"secure=0 shim=1 lock=0"*) ok "linked, not secure: $out" ;;
*) fail "linked, not secure: $out" ;;
esac
if [ "$(id -u)" -ne 0 ]; then
	skipped="not root: cannot make a setgid copy"
else
	cp "$linked" "$work/secure_child" && chgrp 65534 "$work/secure_child" &&
		chmod 2755 "$work/secure_child"
	out=$(SOCKBUF_SHIM=policy:initial "$work/secure_child" 2>&1)
	case "$out" in
	*"secure=1 shim=1 lock=2"*) ok "setgid (AT_SECURE): $out" ;;
	*"secure=0"*) skipped="setgid bit not honoured here (nosuid?): $out" ;;
	*) fail "setgid (AT_SECURE): got '$out', want 'secure=1 shim=1 lock=2'" ;;
	esac
	rm -f "$work/secure_child"
fi

[ "$failures" -eq 0 ] || exit 1
if [ -n "$skipped" ]; then
	echo "SKIP (AT_SECURE part): $skipped"
	exit 77
fi
exit 0

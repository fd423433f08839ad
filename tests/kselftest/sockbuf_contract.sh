#!/bin/bash
# SPDX-License-Identifier: MIT
# kselftest entry: sockbuf-contract's quick profile on the running kernel,
# KTAP on standard output (a test per scenario, a subtest per clause and
# arm; raw kernel properties that do not hold are XFAIL).  Exit status as
# kselftest expects: 0 pass, 1 fail, 4 skip (KSFT_SKIP).
#
# The tool: $SOCKBUF_CONTRACT, else sockbuf-contract on PATH (the
# sockbuf-tools package), else a build next to this directory.
# Arguments given to the script (kselftest's runner passes
# $KSELFTEST_SOCKBUF_CONTRACT_SH_ARGS), else $SOCKBUF_CONTRACT_ARGS, replace
# the default arguments (--quick).
here=$(cd "$(dirname "$0")" && pwd)
ksft_skip=4
args=${SOCKBUF_CONTRACT_ARGS:---quick}
(($#)) && args="$*"

tool=${SOCKBUF_CONTRACT:-}
[[ -n $tool ]] || tool=$(command -v sockbuf-contract 2>/dev/null)
[[ -n $tool ]] || { [[ -x $here/../../build/bin/sockbuf-contract ]] && tool=$here/../../build/bin/sockbuf-contract; }
if [[ -z $tool || ! -x $tool ]]; then
	printf 'KTAP version 1\n1..0 # SKIP sockbuf-contract not found (install sockbuf-tools or set SOCKBUF_CONTRACT)\n'
	exit $ksft_skip
fi

# Progress lines (stderr) become diagnostic lines, printed before the KTAP
# document rather than interleaved with it: kselftest's runner merges
# stderr into the test's output.
progress=$(mktemp)
trap 'rm -f "$progress"' EXIT
# shellcheck disable=SC2086 # the arguments are words on purpose
out=$("$tool" $args --format ktap 2>"$progress")
rc=$?
sed 's/^/# /' "$progress" >&2
case $rc in
0 | 1)
	printf '%s\n' "$out"
	exit $rc
	;;
77)
	# Nothing could run (no root and no user namespace, or every scenario
	# skipped): the KTAP document if there is one, else a plan of none.
	if grep -q '^KTAP version 1$' <<<"$out"; then
		printf '%s\n' "$out"
	else
		printf 'KTAP version 1\n1..0 # SKIP %s\n' "$(tr '\n#' '  ' <<<"$out")"
	fi
	exit $ksft_skip
	;;
*)
	printf '%s\n' "$out" | sed 's/^/# /'
	printf 'KTAP version 1\n1..0 # SKIP sockbuf-contract could not run (exit %s)\n' "$rc"
	exit 1
	;;
esac

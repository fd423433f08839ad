#!/bin/bash
# SPDX-License-Identifier: MIT
# run.sh ARGS DEB_URL OUT: the LAVA test definition's step.  Installs the
# sockbuf-tools package from DEB_URL when it is set, runs sockbuf-contract with ARGS writing
# KTAP, JUnit and JSON into OUT, prints the KTAP into the log and reports
# every subtest through lava-test-case (ktap_to_lava.py).
set -u
args=$1
deb_url=$2
out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"

if [[ -n $deb_url ]]; then
	wget -q -O "$out/sockbuf-tools.deb" "$deb_url" || { echo "cannot fetch $deb_url"; exit 1; }
	apt-get install -y --no-install-recommends "$out/sockbuf-tools.deb" || exit 1
fi
if ! command -v sockbuf-contract >/dev/null; then
	lava-test-case sockbuf-contract --result fail
	echo "sockbuf-contract not found: set SOCKBUF_DEB_URL or install sockbuf-tools"
	exit 0
fi

# shellcheck disable=SC2086 # ARGS are words on purpose
sockbuf-contract $args --format "ktap:$out/contract.ktap,junit:$out/contract.xml,json:$out/contract.json"
rc=$?
cat "$out/contract.ktap" 2>/dev/null
# 0 held, 1 a library guarantee failed: both are results; anything else
# means the run itself did not complete.
if [[ $rc != 0 && $rc != 1 && $rc != 77 ]]; then
	lava-test-case sockbuf-contract --result fail
	exit 0
fi
python3 "$here/ktap_to_lava.py" "$out/contract.ktap"

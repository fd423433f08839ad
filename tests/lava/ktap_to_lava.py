#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ktap_to_lava.py FILE: report a sockbuf-contract KTAP document to LAVA,
a test set per scenario and a test case per clause and arm, through the
lava-test-set and lava-test-case helpers LAVA puts on PATH.  LAVA knows
pass, fail and skip: an XFAIL (a raw kernel property that does not hold)
is reported as skip, as in the JUnit output.  Exit 1 when the document
does not parse."""
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "contract", "formats"))
from ci_formats import FormatError, parse_ktap  # noqa: E402

LAVA_RESULT = {"pass": "pass", "fail": "fail", "xfail": "skip", "skip": "skip"}


def lava_name(name):
    """LAVA test names: letters, digits, dot, dash and underscore."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "unnamed"


def main():
    with open(sys.argv[1]) as f:
        text = f.read()
    try:
        tests, _ = parse_ktap(text)
    except FormatError as e:
        print(f"ktap_to_lava: {e}")
        subprocess.run(["lava-test-case", "sockbuf-contract-ktap", "--result", "fail"])
        return 1
    if not tests:  # "1..0 # SKIP reason": nothing ran
        subprocess.run(["lava-test-case", "sockbuf-contract", "--result", "skip"], check=True)
        return 0
    for t in tests:
        subprocess.run(["lava-test-set", "start", lava_name(t.name)], check=True)
        for s in t.subtests:
            subprocess.run(["lava-test-case", lava_name(s.name), "--result",
                            LAVA_RESULT[s.kind]], check=True)
        subprocess.run(["lava-test-set", "stop"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

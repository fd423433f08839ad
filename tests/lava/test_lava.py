#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The LAVA test definition parses as one (metadata format, params, a run
step that exists), and ktap_to_lava.py reports a real run's KTAP (a saved
document with pass, fail, xfail and skip) as one LAVA test set per scenario
with the right number of each result.  LAVA's helpers are stand-ins that
record their arguments.

usage: test_lava.py SOCKBUF_CONTRACT SAVED_RUN.json"""
import json
import os
import subprocess
import sys
import tempfile

import yaml

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.normpath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(top, "tests", "contract", "formats"))
from ci_formats import parse_ktap  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def main():
    tool, saved = sys.argv[1], sys.argv[2]
    with open(os.path.join(here, "sockbuf-contract.yaml")) as f:
        d = yaml.safe_load(f)
    check(d["metadata"]["format"] == "Lava-Test Test Definition 1.0", "metadata format")
    check(d["metadata"]["name"] == "sockbuf-contract", "metadata name")
    check({"SOCKBUF_ARGS", "SOCKBUF_DEB_URL", "SOCKBUF_OUT"} <= set(d["params"]), "params")
    steps = d["run"]["steps"]
    check(len(steps) == 1 and steps[0].startswith("./tests/lava/run.sh "), f"steps {steps}")
    check(os.access(os.path.join(top, "tests", "lava", "run.sh"), os.X_OK), "run.sh executable")
    for p in d["params"]:
        check("${%s}" % p in steps[0], f"param {p} not passed to run.sh")

    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "lava.log")
        for helper in ("lava-test-case", "lava-test-set"):
            with open(os.path.join(tmp, helper), "w") as f:
                f.write(f'#!/bin/sh\necho "{helper} $*" >> "{log}"\n')
            os.chmod(os.path.join(tmp, helper), 0o755)
        ktap = os.path.join(tmp, "contract.ktap")
        subprocess.run([tool, "--from-json", saved, "--format", f"ktap:{ktap}"], timeout=60,
                       capture_output=True)
        with open(ktap) as f:
            tests, _ = parse_ktap(f.read())
        env = dict(os.environ, PATH=tmp + os.pathsep + os.environ["PATH"])
        r = subprocess.run([sys.executable, "-B", os.path.join(here, "ktap_to_lava.py"), ktap],
                           env=env, timeout=60)
        check(r.returncode == 0, f"ktap_to_lava exit {r.returncode}")
        with open(log) as f:
            lines = f.read().splitlines()

    starts = [x.split()[2] for x in lines if x.startswith("lava-test-set start ")]
    check(starts == [t.name for t in tests], f"test sets {starts}")
    check(sum(x == "lava-test-set stop" for x in lines) == len(tests), "every set stopped")
    got = {"pass": 0, "fail": 0, "skip": 0}
    for x in lines:
        if x.startswith("lava-test-case "):
            got[x.rsplit(" ", 1)[1]] += 1
    want = {"pass": 0, "fail": 0, "skip": 0}
    for t in tests:
        for s in t.subtests:
            want[{"pass": "pass", "fail": "fail"}.get(s.kind, "skip")] += 1
    check(got == want, f"LAVA results {got} != KTAP {want}")
    check(want["pass"] and want["fail"] and want["skip"], f"fixture lacks a kind: {want}")
    print("lava:", got)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

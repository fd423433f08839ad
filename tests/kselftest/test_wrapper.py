#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The kselftest wrapper (Makefile + sockbuf_contract.sh + settings) run as
`make run_tests` on this kernel: its output must be KTAP the project's
parser reads, with Totals matching the subtests and the exit status
kselftest expects (0 pass, 1 fail, 4 skip); without the tool it must say
so as a KTAP skip with exit 4.

usage: test_wrapper.py SOCKBUF_CONTRACT"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "contract", "formats"))
from ci_formats import leaf_counts, parse_ktap  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run_tests(tool, args):
    env = dict(os.environ, SOCKBUF_CONTRACT=tool, SOCKBUF_CONTRACT_ARGS=args)
    return subprocess.run(["make", "-s", "-C", here, "run_tests"], env=env, timeout=300,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    tool = os.path.abspath(sys.argv[1])
    with open(os.path.join(here, "Makefile")) as f:
        check("TEST_PROGS := sockbuf_contract.sh" in f.read(), "Makefile names TEST_PROGS")
    with open(os.path.join(here, "settings")) as f:
        timeout = [int(line.split("=", 1)[1]) for line in f if line.startswith("timeout=")]
    check(len(timeout) == 1 and 60 <= timeout[0] <= 600, f"settings timeout {timeout}")

    r = run_tests(tool, "--quick --scenario bulk,slow_reader")
    tests, totals = parse_ktap(r.stdout)
    counts = leaf_counts(tests)
    if all(t.kind == "skip" for t in tests) and not any(t.subtests for t in tests):
        print("SKIP: the contract could not run here:", r.stdout.strip())
        return 77
    check([t.name for t in tests] == ["bulk", "slow_reader"], f"tests {[t.name for t in tests]}")
    check(totals is not None and all(totals[k] == counts[k] for k in counts),
          f"Totals {totals} != subtests {counts}")
    check(counts["pass"] > 0, "no subtest passed")
    check(any(line.startswith("# [1/2] bulk") for line in r.stdout.splitlines()),
          "progress lines are not KTAP diagnostics")
    failed = counts["fail"] > 0
    # make reports a failed recipe as its own exit 2.
    check((r.returncode != 0) == failed, f"exit {r.returncode} with {counts}")

    # Arguments to the script (kselftest's KSELFTEST_<TEST>_ARGS) win.
    direct = subprocess.run([os.path.join(here, "sockbuf_contract.sh"), "--quick", "--scenario",
                             "bulk"], env=dict(os.environ, SOCKBUF_CONTRACT=tool), timeout=300,
                            capture_output=True, text=True)
    check([t.name for t in parse_ktap(direct.stdout)[0]] == ["bulk"],
          f"arguments to the script not used: {direct.stdout[:200]!r}")

    missing = subprocess.run([os.path.join(here, "sockbuf_contract.sh")], timeout=30,
                             env=dict(os.environ, SOCKBUF_CONTRACT="/nonexistent/sockbuf-contract"),
                             capture_output=True, text=True)
    check(missing.returncode == 4, f"missing tool: exit {missing.returncode}, expected 4")
    tests, _ = parse_ktap(missing.stdout)
    check(tests == [] and "1..0 # SKIP sockbuf-contract not found" in missing.stdout,
          f"missing tool: {missing.stdout!r}")
    print("kselftest wrapper:", counts)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

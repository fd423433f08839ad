#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sockbuf-contract's KTAP and JUnit output, read back by the parsers in
ci_formats.py and counted against the JSON document of the same run.

usage: test_ci_formats.py SOCKBUF_CONTRACT RESULTS_DIR [--live]

Without --live: the saved documents of real runs in docs/results (one with
library and raw failures, one with a skipped scenario), rendered with
--from-json.  With --live: a quick run of two scenarios on this kernel
writing KTAP to stdout and JUnit and JSON to files.  Exit 77 when the live
run cannot run here (its reason printed)."""
import copy
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ci_formats import FormatError, leaf_counts, parse_junit, parse_ktap  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def expected_cases(doc, strict_raw=False):
    """{scenario: {case: kind}} by the rules docs/contract.md states,
    computed here from the JSON, not by the writer's code."""
    out = {}
    for s in doc["scenarios"]:
        cases = {}
        for v in s["verdicts"]:
            halves = [("I", v["library"], True)] if v["clause"] == "I" else [
                (v["clause"] + ".raw", v["raw"], strict_raw),
                (v["clause"] + ".library", v["library"], True)]
            for name, half, binding in halves:
                verdict = half["verdict"]
                if verdict == "pass":
                    kind = "pass"
                elif verdict == "FAIL":
                    kind = "fail" if binding else "xfail"
                else:  # skip, and any outcome the writer does not know
                    kind = "skip"
                cases[name] = kind
        out[s["name"]] = cases
    return out


def totals(cases):
    counts = dict.fromkeys(("pass", "fail", "xfail", "skip"), 0)
    for scenario in cases.values():
        for kind in scenario.values():
            counts[kind] += 1
    return counts


def run(tool, args):
    return subprocess.run([tool] + args, capture_output=True, text=True, timeout=300)


def compare(label, doc, ktap_text, junit_text, strict_raw=False):
    want = expected_cases(doc, strict_raw)
    want_n = totals(want)
    try:
        tests, ktap_totals = parse_ktap(ktap_text)
        junit = parse_junit(junit_text)
    except (FormatError, Exception) as e:  # any parse error is a failure
        check(False, f"{label}: output does not parse: {e}")
        return
    check([t.name for t in tests] == list(want), f"{label}: KTAP tests {[t.name for t in tests]}")
    got = {t.name: {s.name: s.kind for s in t.subtests} for t in tests}
    check(got == want, f"{label}: KTAP subtests differ from the JSON verdicts")
    check(leaf_counts(tests) == want_n, f"{label}: KTAP leaf counts {leaf_counts(tests)} != {want_n}")
    check(ktap_totals is not None and ktap_totals["pass"] == want_n["pass"]
          and ktap_totals["fail"] == want_n["fail"] and ktap_totals["xfail"] == want_n["xfail"]
          and ktap_totals["skip"] == want_n["skip"] and ktap_totals["xpass"] == 0,
          f"{label}: Totals line {ktap_totals} != {want_n}")
    for t in tests:
        failed = any(k == "fail" for k in want[t.name].values())
        check((t.kind == "fail") == failed, f"{label}: scenario {t.name} result {t.kind}")
    junit_kind = {"pass": "pass", "fail": "failure", "xfail": "skipped", "skip": "skipped"}
    flat = {s: {c: junit_kind[k] for c, k in cases.items()} for s, cases in want.items()}
    check({s: {c: k for c, (k, _) in cases.items()} for s, cases in junit.items()} == flat,
          f"{label}: JUnit testcases differ from the JSON verdicts")
    print(f"{label}: {len(tests)} scenarios, {want_n}")


def saved_runs(tool, results):
    docs = {}
    for name in ("contract-6.12.117+deb13-amd64.json", "contract-6.18.44-fc-v1045.json"):
        with open(os.path.join(results, name)) as f:
            docs[name] = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        def render(doc, label, extra=()):
            path = os.path.join(tmp, "doc.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            junit = os.path.join(tmp, "junit.xml")
            r = run(tool, ["--from-json", path, "--format", f"ktap,junit:{junit}", *extra])
            with open(junit) as f:
                return r, r.stdout, f.read()

        for name, doc in docs.items():
            r, ktap, junit = render(doc, name)
            compare(name, doc, ktap, junit)
            lib_fail = any(v["library"]["verdict"] == "FAIL"
                           for s in doc["scenarios"] for v in s["verdicts"])
            check(r.returncode == (1 if lib_fail else 0), f"{name}: exit {r.returncode}")

        # The run with failures: it must show every kind of result.
        doc = docs["contract-6.12.117+deb13-amd64.json"]
        n = totals(expected_cases(doc))
        check(all(n[k] > 0 for k in ("pass", "fail", "xfail", "skip")),
              f"fixture lacks a kind of result: {n}")
        r, ktap, junit = render(doc, "strict", ["--strict-raw"])
        compare("6.12 --strict-raw", doc, ktap, junit, strict_raw=True)
        check(totals(expected_cases(doc, True))["xfail"] == 0, "strict: raw FAIL still xfail")

        # A skipped scenario: a SKIP directive with the scenario's reason.
        doc = docs["contract-6.18.44-fc-v1045.json"]
        skipped = [s for s in doc["scenarios"] if "skip_reason" in s]
        check(len(skipped) == 1, "6.18 fixture: expected one skipped scenario")
        _, ktap, _ = render(doc, "6.18")
        line = [x for x in ktap.splitlines() if x.startswith("ok ") and skipped[0]["name"] in x]
        check(line and "# SKIP " + skipped[0]["skip_reason"][:20] in line[0],
              f"skipped scenario line: {line}")

        # An outcome the writers do not know (the model may grow one):
        # reported as a SKIP that names it, never as a pass or a plain fail.
        doc = copy.deepcopy(docs["contract-6.18.44-fc-v1045.json"])
        half = doc["scenarios"][0]["verdicts"][3]["library"]
        half["verdict"], half["why"] = "unverified", "sampler too slow to judge"
        case = doc["scenarios"][0]["verdicts"][3]["clause"] + ".library"
        r, ktap, junit = render(doc, "unverified")
        compare("unknown outcome", doc, ktap, junit)
        want_line = f"# SKIP unverified: sampler too slow to judge"
        check(any(x.strip().endswith(case + " " + want_line) for x in ktap.splitlines()),
              f"unverified case not reported as '{case} {want_line}'")
        check(parse_junit(junit)[doc["scenarios"][0]["name"]][case]
              == ("skipped", "unverified: sampler too slow to judge"), "unverified in JUnit")


def parser_rejects():
    """The readers must refuse what a lab would misread, or passing proves
    nothing."""
    good = "KTAP version 1\n1..1\n  KTAP version 1\n  1..2\n  ok 1 a\n  not ok 2 b\nnot ok 1 s\n"
    parse_ktap(good)
    bad = {
        "parent ok over a failed subtest": good.replace("not ok 1 s", "ok 1 s"),
        "plan larger than the results": good.replace("  1..2", "  1..3"),
        "numbers not consecutive": good.replace("not ok 2 b", "not ok 3 b"),
        "no version line": good.replace("KTAP version 1\n1..1", "1..1"),
        "subtest not indented": good.replace("  ok 1 a", "ok 1 a"),
    }
    for what, text in bad.items():
        try:
            parse_ktap(text)
            check(False, f"KTAP reader accepted: {what}")
        except FormatError:
            pass
    junit = ('<testsuites tests="1" failures="1" errors="0" skipped="0"><testsuite name="s" '
             'tests="1" failures="1" errors="0" skipped="0"><testcase classname="c" name="a">'
             '<failure message="m"/></testcase></testsuite></testsuites>')
    parse_junit(junit)
    for what, text in {"suite count wrong": junit.replace('failures="1" errors="0" skipped="0">'
                                                          '<testcase', 'failures="0" errors="0" '
                                                          'skipped="0"><testcase'),
                       "total wrong": junit.replace('tests="1" failures="1" errors="0" skipped="0">'
                                                    '<testsuite', 'tests="2" failures="1" '
                                                    'errors="0" skipped="0"><testsuite')}.items():
        try:
            parse_junit(text)
            check(False, f"JUnit reader accepted: {what}")
        except FormatError:
            pass


def live_run(tool):
    with tempfile.TemporaryDirectory() as tmp:
        junit, js = os.path.join(tmp, "junit.xml"), os.path.join(tmp, "run.json")
        r = run(tool, ["--quick", "--scenario", "bulk,slow_reader",
                       "--format", f"ktap,junit:{junit},json:{js}"])
        if r.returncode == 77:
            print("SKIP: sockbuf-contract could not run here:", r.stdout.strip(), r.stderr.strip())
            sys.exit(77)
        with open(js) as f:
            doc = json.load(f)
        with open(junit) as f:
            compare("live quick run", doc, r.stdout, f.read())
        n = totals(expected_cases(doc))
        check(n["pass"] > 0, "live run: no pass")
        lib_fail = any(v["library"]["verdict"] == "FAIL"
                       for s in doc["scenarios"] for v in s["verdicts"])
        check(r.returncode == (1 if lib_fail else 0), f"live run: exit {r.returncode}")


def main():
    tool, results = sys.argv[1], sys.argv[2]
    if "--live" in sys.argv[3:]:
        live_run(tool)
    else:
        parser_rejects()
        saved_runs(tool, results)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: MIT
"""Readers for the two CI formats sockbuf-contract writes, strict enough to
reject output a lab would misread.

parse_ktap(): KTAP v1 as Documentation/dev-tools/ktap.rst specifies it
(version line, plan, consecutive numbers, two-space nesting, a parent that
fails when a subtest fails) plus kselftest's "# Totals:" line.
parse_junit(): JUnit XML as GitLab/Jenkins read it (testsuites > testsuite
> testcase with at most one failure/error/skipped), every count attribute
equal to what the elements say.
"""
import re
import xml.etree.ElementTree as ET

RESULT = re.compile(r"^(ok|not ok) ([0-9]+)(?: ([^#]*?))?\s*(?:# ?(.*))?$")
TOTALS = re.compile(r"^# Totals: pass:(\d+) fail:(\d+) xfail:(\d+) xpass:(\d+) "
                    r"skip:(\d+) error:(\d+)$")
KINDS = ("pass", "fail", "xfail", "skip")


class FormatError(Exception):
    pass


class Test:
    def __init__(self, name, kind, directive, subtests):
        self.name, self.kind, self.directive, self.subtests = name, kind, directive, subtests


def _kind(ok, directive):
    word = directive.split(" ", 1)[0] if directive else ""
    if word == "SKIP":
        return "skip"
    if word == "XFAIL":
        return "xfail"
    if word in ("TIMEOUT", "ERROR") or not ok:
        return "fail"
    return "pass"


class _Reader:
    def __init__(self, text):
        self.lines = text.splitlines()
        self.i = 0
        self.totals = None

    def peek(self):
        return self.lines[self.i] if self.i < len(self.lines) else None

    def fail(self, what):
        raise FormatError(f"line {self.i + 1}: {what}: {self.peek()!r}")

    def block(self, depth):
        """A version line, a plan and its tests, all at @depth."""
        pad = "  " * depth
        if self.peek() != pad + "KTAP version 1":
            self.fail(f"expected 'KTAP version 1' at depth {depth}")
        self.i += 1
        plan = None
        tests = []
        while True:
            line = self.peek()
            if line is None:
                break
            if line.startswith(pad + "# "):
                m = TOTALS.match(line[len(pad):])
                if m:
                    if depth != 0:
                        self.fail("Totals line inside a subtest")
                    self.totals = dict(zip(("pass", "fail", "xfail", "xpass", "skip",
                                            "error"), map(int, m.groups())))
                self.i += 1
                continue
            if plan is None:
                m = re.match(r"^1\.\.([0-9]+)(?: # .*)?$", line[len(pad):]) if line.startswith(pad) else None
                if not m:
                    self.fail("expected a plan '1..N'")
                plan = int(m.group(1))
                self.i += 1
                continue
            if line == "  " * (depth + 1) + "KTAP version 1":
                subtests = self.block(depth + 1)
                line = self.peek()
                if line is None or not line.startswith(pad) or line.startswith(pad + " "):
                    self.fail("subtests not followed by their parent's result")
            elif not line.startswith(pad) or line.startswith(pad + " "):
                break  # the end of this block: the parent's result line
            else:
                subtests = []
            m = RESULT.match(line[len(pad):])
            if not m:
                self.fail("expected a result line")
            ok, number, name, directive = m.group(1) == "ok", int(m.group(2)), m.group(3), m.group(4)
            if number != len(tests) + 1:
                self.fail(f"test number {number}, expected {len(tests) + 1}")
            t = Test(name or "", _kind(ok, directive), directive or "", subtests)
            if any(s.kind == "fail" for s in subtests) and t.kind != "fail":
                self.fail("a subtest failed but its parent is ok")
            tests.append(t)
            self.i += 1
        if plan is None:
            self.fail("no plan")
        if plan != len(tests):
            raise FormatError(f"depth {depth}: plan 1..{plan} but {len(tests)} results")
        return tests


def parse_ktap(text):
    """Returns (tests, totals): the top-level tests and the Totals line."""
    r = _Reader(text)
    # Lines before the version line (a runner's own output, diagnostics)
    # are not part of the document.
    while r.peek() is not None and r.peek() != "KTAP version 1":
        r.i += 1
    tests = r.block(0)
    if r.peek() is not None:
        r.fail("text after the last result")
    return tests, r.totals


def leaf_counts(tests):
    counts = dict.fromkeys(KINDS, 0)
    for t in tests:
        if t.subtests:
            for k, v in leaf_counts(t.subtests).items():
                counts[k] += v
        else:
            counts[t.kind] += 1
    return counts


def parse_junit(text):
    """Returns {suite name: {case name: (kind, message)}} after checking
    the structure and every count attribute."""
    root = ET.fromstring(text)
    if root.tag != "testsuites":
        raise FormatError(f"root element {root.tag}, expected testsuites")
    out = {}
    sums = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in root:
        if suite.tag != "testsuite":
            raise FormatError(f"{suite.tag} under testsuites")
        name = suite.get("name")
        if not name or name in out:
            raise FormatError(f"testsuite without a unique name: {name!r}")
        cases = {}
        n = dict.fromkeys(sums, 0)
        for case in suite:
            if case.tag == "properties":
                continue
            if case.tag != "testcase" or not case.get("name") or not case.get("classname"):
                raise FormatError(f"{name}: bad element {case.tag} {case.attrib}")
            kids = [k for k in case if k.tag in ("failure", "error", "skipped")]
            if len(kids) > 1:
                raise FormatError(f"{name}/{case.get('name')}: more than one result")
            kind = kids[0].tag if kids else "pass"
            message = kids[0].get("message", "") if kids else ""
            n["tests"] += 1
            if kind != "pass":
                n[{"failure": "failures", "error": "errors", "skipped": "skipped"}[kind]] += 1
            cases[case.get("name")] = (kind, message)
        for k in n:
            if int(suite.get(k, -1)) != n[k]:
                raise FormatError(f"{name}: {k}={suite.get(k)} but {n[k]} in the elements")
            sums[k] += n[k]
        out[name] = cases
    for k in sums:
        if int(root.get(k, -1)) != sums[k]:
            raise FormatError(f"testsuites {k}={root.get(k)} but {sums[k]} in the suites")
    return out

#!/usr/bin/env python3
"""kernel/contract_compare.py LABEL=JSON...: the contract suite's results
(tests/kernels/run-matrix --full, one JSON per guest run) side by side:
per scenario and run, the integrity check (flows, short, corrupt) and
the verdicts of clauses I and C3 for the raw kernel and the library.
Markdown on stdout. Used to compare kernels built from the same source
and configuration (stock against the series), several runs each."""
import json
import sys


def scenarios(path):
    d = json.load(open(path))
    c = d.get("sections", {}).get("contract", {})
    out = {}
    for s in c.get("scenarios", []):
        v = {x["clause"]: x for x in s.get("verdicts", [])}
        out[s["name"]] = (s.get("integrity") or {}, v)
    return d.get("date", "?"), d.get("wall_seconds"), out


def verdict(v, clause, side):
    x = v.get(clause, {}).get(side, {})
    n = x.get("violations_total", 0)
    return x.get("verdict", "-") + (" (%d)" % n if n else "")


def main():
    runs = []
    for arg in sys.argv[1:]:
        label, sep, path = arg.partition("=")
        if not sep:
            raise SystemExit("usage: contract_compare.py LABEL=JSON...")
        runs.append((label,) + scenarios(path))
    if not runs:
        raise SystemExit("usage: contract_compare.py LABEL=JSON...")
    print("| run | date | wall s |\n|---|---|---|")
    for label, date, wall, _ in runs:
        print("| %s | %s | %s |" % (label, date, "%.0f" % wall if wall else "-"))
    names = []
    for *_, sc in runs:
        names += [n for n in sc if n not in names]
    print("\n| scenario | run | flows | short | corrupt | I | C3 raw | C3 library |")
    print("|---|---|---:|---:|---:|---|---|---|")
    for n in names:
        for label, _, _, sc in runs:
            if n not in sc:
                print("| %s | %s | - | - | - | missing | - | - |" % (n, label))
                continue
            integ, v = sc[n]
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                n, label, integ.get("flows", "-"), integ.get("short_flows", "-"),
                integ.get("corrupt", "-"), verdict(v, "I", "raw"), verdict(v, "C3", "raw"),
                verdict(v, "C3", "library")))


if __name__ == "__main__":
    main()

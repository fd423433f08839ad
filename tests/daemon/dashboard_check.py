#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The sample Grafana dashboard (docs/grafana/sockbufd.json) asks only for
metrics sockbufd exports (the names registered in tools/daemon/metrics.cc,
a histogram's _bucket, _sum and _count), with the labels they carry, and is valid JSON with a unique id per panel.

usage: dashboard_check.py DASHBOARD METRICS_CC"""
import json
import re
import sys


def main():
    dash = json.load(open(sys.argv[1]))
    src = open(sys.argv[2]).read()
    names = set(re.findall(r'\.Name\("([a-z_]+)"\)', src))
    # A histogram is exported as NAME_bucket (label le), NAME_sum, NAME_count.
    hists = set(re.findall(r'BuildHistogram\(\)\s*\.Name\("([a-z_]+)"\)', src))
    names |= {h + sfx for h in hists for sfx in ("_bucket", "_sum", "_count")}
    labels = set(re.findall(r'\{"([a-z]+)", ', src)) | {"instance", "job"}
    if hists:
        labels.add("le")
    bad = []
    ids = [p["id"] for p in dash["panels"]]
    if len(ids) != len(set(ids)):
        bad.append("panel ids repeat")
    for p in dash["panels"]:
        for t in p["targets"]:
            for m in re.findall(r"\b(sockbuf_[a-z_]+)\b", t["expr"]):
                if m not in names:
                    bad.append(f"panel {p['title']!r}: {m} is not exported")
            for lab in re.findall(r"by \(([^)]*)\)", t["expr"]):
                for l in [x.strip() for x in lab.split(",")]:
                    if l not in labels:
                        bad.append(f"panel {p['title']!r}: label {l} is not exported")
    for b in bad:
        print("FAIL: " + b)
    print(f"{len(dash['panels'])} panels, {len(names)} metrics exported: "
          + ("FAIL" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

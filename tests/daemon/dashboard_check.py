#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The sample Grafana dashboard (docs/grafana/sockbufd.json) asks only for
metrics sockbufd exports (the names registered in tools/daemon/metrics.cc,
a histogram's _bucket, _sum and _count), with the labels they carry, and is valid JSON with a unique id per panel.
Each series a panel draws is told apart in its legend: every label an
expression groups by (but le) is in the target's legendFormat, and every
label the legend shows is one it groups by.  A panel drawn from the event
programs' histogram says in its description why it is empty while the
daemon polls.  The daemon's metrics source carries no prometheus-cpp
Exposer (its exposer_* series, NaN quantiles, in /metrics).

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
            groups = re.findall(r"by \(([^)]*)\)", t["expr"])
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))
            for g in groups[:1]:
                want = {x.strip() for x in g.split(",")} - {"le"}
                if want - legend:
                    bad.append(f"panel {p['title']!r}: grouped by {sorted(want - legend)} "
                               f"not in the legend {t.get('legendFormat')!r}")
                if legend - want:
                    bad.append(f"panel {p['title']!r}: legend shows {sorted(legend - want)}, "
                               f"not grouped by")
        if any("below_floor_seconds" in t["expr"] for t in p["targets"]) and \
                "polls" not in p.get("description", ""):
            bad.append(f"panel {p['title']!r}: no word of why it is empty while polling")
    if re.search(r"prometheus::Exposer|exposer\.h", src):
        bad.append("metrics.cc serves through prometheus-cpp's Exposer (exposer_* series)")
    for b in bad:
        print("FAIL: " + b)
    print(f"{len(dash['panels'])} panels, {len(names)} metrics exported: "
          + ("FAIL" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

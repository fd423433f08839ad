#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every line `sockbuf probe`, `sockbuf show` and sockbuf-contract's table
print fits 80 columns, and wrapping loses nothing: show still lists every
socket its --json lists, and the contract table, read back, has every
scenario x clause cell of the JSON document, also when the clauses must be
split over several tables.

usage: test_line_widths.py SOCKBUF SOCKBUF_CONTRACT SAVED_RUN.json"""
import copy
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

WIDTH = 80
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def check_widths(label, text):
    long = [line for line in text.splitlines() if len(line) > WIDTH]
    check(not long, f"{label}: {len(long)} line(s) over {WIDTH} columns: {long[:3]}")


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


# Sockets whose `show` lines are long: IPv4-mapped IPv6 endpoints, and a
# listener with a locked receive buffer (its diagnosis is a long sentence).
CHILD = r"""
import socket, sys
l = socket.socket(socket.AF_INET6)
l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
l.bind(("::ffff:127.0.0.1", 0))
l.listen()
c = socket.create_connection(("::ffff:127.0.0.1", l.getsockname()[1]))
s, _ = l.accept()
print("ready", flush=True)
sys.stdin.read()  # until the parent closes the pipe
"""


def show(sockbuf):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        check(child.stdout.readline().strip() == "ready", "show: child did not start")
        text = run([sockbuf, "show", str(child.pid)])
        js = run([sockbuf, "show", str(child.pid), "--json"])
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    if text.returncode != 0:
        check(False, f"show exit {text.returncode}: {text.stderr}")
        return
    check_widths("sockbuf show", text.stdout)
    sockets = json.loads(js.stdout)["sockets"]
    heads = re.findall(r"^pid \d+ fd (\d+)", text.stdout, re.M)
    check(len(sockets) == 3 and len(heads) == 3, f"show: {len(heads)} sockets, json {len(sockets)}")
    check("127.0.0.1" in text.stdout, "show: endpoints missing")


def expected_cells(doc):
    def short(o):
        return {"pass": "ok", "FAIL": "FAIL"}.get(o, "-")

    cells = {}
    for s in doc["scenarios"]:
        for v in s["verdicts"]:
            raw, lib = v["raw"]["verdict"], v["library"]["verdict"]
            if raw == "skip" and lib == "skip":
                c = "skip"
            elif v["clause"] == "I":
                c = short(raw)
            else:
                c = f"{short(raw)}/{short(lib)}"
            cells[(s["name"], v["clause"])] = c
    return cells


def table_cells(text, scenarios):
    """Reads the table(s) back: header rows start with 'scenario'."""
    cells, headers, cols = {}, [], None
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["scenario"]:
            cols = words[1:]
            headers.append(cols)
        elif cols and words and words[0] in scenarios:
            check(len(words) == len(cols) + 1, f"table row {line!r}")
            for c, value in zip(cols, words[1:]):
                cells[(words[0], c)] = value
        elif not line.strip():
            cols = None  # a blank line ends a table
    return cells, headers


def contract_table(tool, saved):
    with open(saved) as f:
        doc = json.load(f)
    scenarios = [s["name"] for s in doc["scenarios"]]
    all_fail = copy.deepcopy(doc)
    for s in all_fail["scenarios"]:
        for v in s["verdicts"]:
            v["raw"]["verdict"] = v["library"]["verdict"] = "FAIL"
    with tempfile.TemporaryDirectory() as tmp:
        for label, d, split in (("saved run", doc, False), ("every cell FAIL/FAIL", all_fail, True)):
            path = os.path.join(tmp, "doc.json")
            with open(path, "w") as f:
                json.dump(d, f)
            out = run([tool, "--from-json", path]).stdout
            check_widths(f"contract table ({label})", out)
            cells, headers = table_cells(out, scenarios)
            check(cells == expected_cells(d), f"contract table ({label}): cells differ")
            check((len(headers) > 1) == split, f"contract table ({label}): {len(headers)} tables")
            flat = [c for h in headers for c in h]
            check(sorted(flat) == sorted(set(flat)) and len(flat) == 8,
                  f"contract table ({label}): columns {headers}")


def main():
    sockbuf, tool, saved = sys.argv[1:4]
    probe = run([sockbuf, "probe"])
    check(probe.returncode == 0 and "set_initial_bufsize will use:" in probe.stdout,
          f"probe: exit {probe.returncode}")
    check_widths("sockbuf probe", probe.stdout)
    show(sockbuf)
    contract_table(tool, saved)
    live = run([tool, "--quick", "--scenario", "bulk,slow_reader"])
    if live.returncode in (0, 1):
        check_widths("sockbuf-contract --quick", live.stdout)
    else:
        print(f"note: live contract run not checked (exit {live.returncode})")
    print("line widths:", "ok" if not failures else f"{len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

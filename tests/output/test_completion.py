#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The bash completion (tools/cli/sockbuf.bash-completion) offers what the
tool takes: the commands, and for each command every option its --help
names (and nothing it does not); the values of --policy, --via and
--trace; process ids where a PID goes.

usage: test_completion.py SOCKBUF COMPLETION_FILE
Exit: 0 pass, 1 fail, 77 skip (no bash).
"""
import re
import shutil
import subprocess
import sys

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def complete(comp_file, words):
    """What the completion offers for the command line @words (the last
    one being completed)."""
    script = (f'source "{comp_file}"; COMP_WORDS=({" ".join(repr(w) for w in words)}); '
              f'COMP_CWORD={len(words) - 1}; _sockbuf; printf "%s\\n" "${{COMPREPLY[@]}}"')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=20)
    return set(r.stdout.split())


def main():
    sockbuf, comp = sys.argv[1:3]
    if not shutil.which("bash"):
        print("SKIP: no bash")
        return 77
    top = complete(comp, ["sockbuf", ""])
    check({"probe", "demo", "run", "show", "fix"} <= top, f"commands offered: {sorted(top)}")
    for cmd in ("probe", "demo", "run", "show", "fix"):
        out = subprocess.run([sockbuf, cmd, "--help"], capture_output=True, text=True).stdout
        helped = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", out)) | {"--help"}
        offered = {w for w in complete(comp, ["sockbuf", cmd, "--"]) if w.startswith("--")}
        offered.discard("--")
        check(helped == offered,
              f"sockbuf {cmd}: the options of --help are offered "
              f"(help only: {sorted(helped - offered)}, completion only: "
              f"{sorted(offered - helped)})")
    check(complete(comp, ["sockbuf", "run", "--via", ""]) == {"auto", "seccomp", "preload"},
          "run --via: auto seccomp preload")
    check(complete(comp, ["sockbuf", "show", "--trace", ""]) == {"auto", "on", "off"},
          "show --trace: auto on off")
    pids = complete(comp, ["sockbuf", "show", "1"])
    check("1" in pids and all(p.isdigit() for p in pids), "show 1<TAB>: process ids")
    check(complete(comp, ["sockbuf", "run", "--", "bas"]) >= {"bash"},
          "run -- bas<TAB>: commands")
    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

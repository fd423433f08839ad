#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every man page's footer names the release it documents: the .TH line's
version is NEWS.md's newest release ("sockbuf X.Y.Z") and its date that
release's day ("December 6, 2026"); an "## Unreleased" section is not a
release.  A page left at an older release fails, named with what it says.

usage: check_man_pages.py NEWS.md CHANGELOG_SCRIPT MANDIR
Exit: 0 every page agrees, 1 some page does not (each named).
Pages that only source another (".so") are that page.
"""
import glob
import importlib.util
import os
import shlex
import sys


def newest_release(news, script):
    spec = importlib.util.spec_from_file_location("changelog_from_news", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(news, encoding="utf-8") as f:
        entries = mod.parse(f.read())
    if not entries:
        sys.exit(f"man pages: {news} has no release section")
    version, when, _ = entries[0]
    return version, f"{when:%B} {when.day}, {when.year}"


def main():
    news, script, mandir = sys.argv[1:4]
    version, date = newest_release(news, script)
    pages = sorted(glob.glob(os.path.join(mandir, "*.[1-8]")))
    bad = []
    for page in pages:
        with open(page, encoding="utf-8") as f:
            lines = f.readlines()
        if any(line.startswith(".so ") for line in lines[:3]):
            continue  # another page's name: that page's footer counts
        th = next((line for line in lines if line.startswith(".TH ")), None)
        if th is None:
            bad.append(f"{os.path.basename(page)}: no .TH line")
            continue
        fields = shlex.split(th)
        got_date = fields[3] if len(fields) > 3 else ""
        got_version = fields[4] if len(fields) > 4 else ""
        if got_version != f"sockbuf {version}" or got_date != date:
            bad.append(f"{os.path.basename(page)}: .TH says \"{got_date}\" \"{got_version}\"")
    for b in bad:
        print(f"man pages: {b}; NEWS.md's newest release is {version} of {date}")
    if not pages:
        print(f"man pages: none in {mandir}")
        return 1
    if bad:
        print(f"man pages: {len(bad)} of {len(pages)} pages name another release")
        return 1
    print(f"man pages: {len(pages)} pages say sockbuf {version}, {date}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Debian changelog of the packages, made from NEWS.md.

    packaging/changelog-from-news.py NEWS.md [OUT]     (OUT: stdout)
    packaging/changelog-from-news.py --version NEWS.md (the newest version)

NEWS.md holds one section per version, newest first:

    ## 0.3.0 (2026-12-06 08:00 UTC)

    - What changed, for users; continuation lines
      indented by two spaces.

Every version section becomes one changelog entry with its items, the
heading's time as the trailer's date. Anything else (the preface, other
headings) is left out. A version heading that does not parse is an error,
never a silent skip: the packages must not lose a release.
"""
import datetime
import re
import sys
import textwrap

MAINTAINER = "sockbuf maintainers <sockbuf@example.org>"
HEADING = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d\d-\d\d \d\d:\d\d) UTC\)\s*$")


def parse(text):
    """[(version, datetime, [item, ...]), ...] in file order."""
    entries, item = [], None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            m = HEADING.match(line)
            if not m:
                if re.match(r"^## \d", line):
                    raise ValueError("NEWS.md:%d: a version heading must read "
                                     "'## X.Y.Z (YYYY-MM-DD HH:MM UTC)': %r" % (n, line))
                entries.append(None)  # another section: its lines are not news
                continue
            when = datetime.datetime.strptime(m.group(2), "%Y-%m-%d %H:%M")
            entries.append((m.group(1), when.replace(tzinfo=datetime.timezone.utc), []))
            item = None
        elif not entries or entries[-1] is None:
            continue
        elif line.startswith("- "):
            item = [line[2:].strip()]
            entries[-1][2].append(item)
        elif line.startswith("  ") and item is not None and line.strip():
            item.append(line.strip())
        elif not line.strip():
            item = None
    out = [e for e in entries if e is not None]
    for version, _, items in out:
        if not items:
            raise ValueError("NEWS.md: version %s lists no change" % version)
    return [(v, w, [plain(" ".join(i)) for i in items]) for v, w, items in out]


def plain(markdown):
    """An item without Markdown's code and emphasis marks."""
    return re.sub(r"\*\*([^*]+)\*\*", r"\1", re.sub(r"`([^`]*)`", r"\1", markdown))


def changelog(entries):
    parts = []
    for version, when, items in entries:
        lines = ["sockbuf (%s) unstable; urgency=medium" % version, ""]
        for it in items:
            lines += textwrap.wrap(it, width=78, initial_indent="  * ",
                                   subsequent_indent="    ", break_on_hyphens=False)
        lines += ["", " -- %s  %s" % (MAINTAINER, when.strftime("%a, %d %b %Y %H:%M:%S +0000"))]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def load(path):
    """The entries of @path; a file without a good version section ends
    the program with the reason."""
    with open(path, encoding="utf-8") as f:
        try:
            entries = parse(f.read())
        except ValueError as e:
            raise SystemExit(str(e))
    if not entries:
        raise SystemExit("%s: no version section" % path)
    return entries


def main(argv):
    if len(argv) == 2 and argv[0] == "--version":
        print(load(argv[1])[0][0])
        return 0
    if not 1 <= len(argv) <= 2:
        raise SystemExit(__doc__.strip().splitlines()[2].strip())
    text = changelog(load(argv[0]))
    if len(argv) == 2:
        with open(argv[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

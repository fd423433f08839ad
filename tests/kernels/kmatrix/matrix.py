"""The matrix file: one kernel series per line.

Columns (whitespace separated; '-' for none):
  name     label used in results (e.g. 5.10)
  suites   Debian suites allowed to provide it, comma separated; 'host' for
           this machine's own kernel, run natively
  package  regular expression for the kernel image package name; the
           newest version that matches in those suites is taken
  extra    further packages, '{abi}' replaced by the image name from its
           first digit on (sid: linux-modules-{abi} beside linux-binary-)
  sets     which runs include it: quick, full (comma separated)
"""
import re
from dataclasses import dataclass, field


@dataclass
class Entry:
    name: str
    suites: list
    package: str
    extra: list = field(default_factory=list)
    sets: list = field(default_factory=list)

    @property
    def is_host(self):
        return self.suites == ["host"]


def load(path):
    entries = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            cols = line.split()
            if len(cols) != 5:
                raise ValueError("%s:%d: want 5 columns, got %d" % (path, lineno, len(cols)))
            name, suites, package, extra, sets = cols
            if package != "-":
                re.compile(package)
            entries.append(Entry(
                name=name,
                suites=suites.split(","),
                package=package,
                extra=[] if extra == "-" else extra.split(","),
                sets=sets.split(",")))
    return entries

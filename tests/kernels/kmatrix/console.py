"""Parse what the guest's init writes between marker lines."""
import json
import re

BEGIN = re.compile(r"^@@SBK-BEGIN (\S+)@@$")
END = re.compile(r"^@@SBK-END (\S+) rc=(-?\d+)@@$")
STEP = re.compile(r"^@@SBK STEP (\S+)@@$")
DONE = "@@SBK DONE@@"
# The guest kernel's own report of a crash: the first line of an oops or
# BUG, the "CPU: ..." line that says whether the kernel was tainted, the
# RIP line that names where, and the final "Kernel panic" line.
OOPS = re.compile(r"^\[\s*[\d.]+\]\s+((?:Oops|BUG|general protection fault)\b.*)$")
TAINT = re.compile(r"^\[\s*[\d.]+\]\s+CPU: .*?\b(Not tainted|Tainted: [A-Z ]+?)\s+\d")
RIP = re.compile(r"^\[\s*[\d.]+\]\s+RIP: [0-9a-fx]+:(\S+)")
PANIC = re.compile(r"^\[\s*[\d.]+\]\s+Kernel panic - not syncing: (.*)$")


class Collector:
    """Feed console lines; keeps sections {name: json} and their exit codes."""

    def __init__(self, on_step=None):
        self.sections = {}
        self.rc = {}
        self.done = False
        self.on_step = on_step
        self._name = None
        self._buf = []
        # Set when the guest kernel panicked: {"oops", "where", "taint",
        # "panic"}, each as the console printed it (the first oops only).
        self.panic = None
        self._oops = {}

    def kernel_crash(self):
        """One line for a panic the console showed, or None."""
        if not self.panic:
            return None
        p = self.panic
        head = p.get("oops") or "Kernel panic - not syncing: %s" % p["panic"]
        return "%s%s (%s)" % (head, " at " + p["where"] if p.get("where") else "",
                              (p.get("taint") or "taint unknown").lower())

    def untainted_crash(self):
        """True when the kernel panicked with nothing loaded that taints it:
        no out-of-tree or unsigned module, no earlier warning.  Such a crash
        is the guest kernel's (or the emulator's), never a module's of ours."""
        return bool(self.panic) and self.panic.get("taint") == "Not tainted"

    def _watch_kernel(self, line):
        m = OOPS.match(line)
        if m and "oops" not in self._oops:
            self._oops["oops"] = m.group(1).strip()
            return
        m = TAINT.match(line)
        if m and "oops" in self._oops and "taint" not in self._oops:
            self._oops["taint"] = m.group(1).strip()
            return
        m = RIP.match(line)
        if m and "oops" in self._oops and "where" not in self._oops:
            self._oops["where"] = m.group(1)
            return
        m = PANIC.match(line)
        if m and self.panic is None:
            self.panic = dict(self._oops, panic=m.group(1).strip())

    def feed(self, line):
        line = line.rstrip("\r\n").replace("\r", "")
        if line.startswith("["):
            self._watch_kernel(line)
        if self._name is not None:
            m = END.match(line)
            if m and m.group(1) == self._name:
                text = "\n".join(self._buf)
                try:
                    self.sections[self._name] = json.loads(text)
                except ValueError as e:
                    self.sections[self._name] = {"unparsed": text[-2000:], "error": str(e)}
                self.rc[self._name] = int(m.group(2))
                self._name = None
            else:
                self._buf.append(line)
            return
        m = BEGIN.match(line)
        if m:
            self._name, self._buf = m.group(1), []
            return
        m = STEP.match(line)
        if m and self.on_step:
            self.on_step(m.group(1))
        if line == DONE:
            self.done = True

"""Parse what the guest's init writes between marker lines."""
import json
import re

BEGIN = re.compile(r"^@@SBK-BEGIN (\S+)@@$")
END = re.compile(r"^@@SBK-END (\S+) rc=(-?\d+)@@$")
STEP = re.compile(r"^@@SBK STEP (\S+)@@$")
DONE = "@@SBK DONE@@"


class Collector:
    """Feed console lines; keeps sections {name: json} and their exit codes."""

    def __init__(self, on_step=None):
        self.sections = {}
        self.rc = {}
        self.done = False
        self.on_step = on_step
        self._name = None
        self._buf = []

    def feed(self, line):
        line = line.rstrip("\r\n").replace("\r", "")
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

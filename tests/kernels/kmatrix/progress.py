"""Progress lines: kernel, stage, elapsed; to stderr so stdout stays clean."""
import sys
import time

_T0 = time.monotonic()


class Progress:
    def __init__(self, kernel):
        self.kernel = kernel
        self.t0 = time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.t0

    def __call__(self, stage, detail=""):
        line = "[%7.1fs] %-6s %-18s %6.1fs %s" % (
            time.monotonic() - _T0, self.kernel, stage, self.elapsed(), detail)
        print(line.rstrip(), file=sys.stderr, flush=True)


def say(msg):
    print("[%7.1fs] %s" % (time.monotonic() - _T0, msg), file=sys.stderr, flush=True)

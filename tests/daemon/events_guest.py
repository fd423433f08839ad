#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sockbufd's event source on a kernel that has fexit: a qemu guest of the
kernel matrix's cache (bench/lab/guest/run.py) runs
bench/lab/daemon/events_lab.sh, where a process that guards nothing
itself has its senders cut by the kernel under the guest's own lowered
tcp_mem, and the daemon, with one program set for the guest, restores
them.  From the daemon's start line and its metrics:

  events    the daemon says events are on and its source is up.
  restores  sockets are restored from records (found="event"), none of
            them lost, and each such restore is in the time-below-floor
            histogram.
  bound     every one of them was below its floor for at most 50 ms
            (SOCKBUF_GUARD_EVENT_BOUND_US, the bound the guard's events
            keep; sockbufd(8)) besides the longest a record waited for
            the daemon's thread (sockbuf_event_wait_seconds_max: the
            scheduler's share, large when the host running qemu is
            busy), on the kernel's clock: from the exit of the function
            that cut it to the restore's return; judged at the first
            histogram bucket at or above that sum.

Skips (77) without a cached 6.12 kernel (tests/kernels/run-matrix --full
fills the cache) or without qemu.  Every wait is bounded (the guest's
timeout).  usage: events_guest.py --bin-dir BUILD/bin [--kernel 6.12]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(TOP, "tests", "shim"))
import real_programs as rp  # noqa: E402
import daemon_lab  # noqa: E402

BOUND_S = 0.05


def metric(text, name, **labels):
    """A metric of the guest's console, its lines marked "@@ "."""
    return daemon_lab.metric_in(text, name, prefix="@@ ", **labels)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--kernel", default="6.12")
    a = ap.parse_args()
    if not shutil.which("qemu-system-x86_64"):
        return rp.skip("no qemu-system-x86_64")
    cache = os.environ.get("SOCKBUF_KERNEL_CACHE") or os.path.expanduser("~/.cache/sockbuf-kernels")
    if not os.path.isdir(os.path.join(cache, "extract")):
        return rp.skip(f"no kernel cache at {cache} (tests/kernels/run-matrix --full fills it)")
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "console.log")
        r = subprocess.run(
            [sys.executable, os.path.join(TOP, "bench", "lab", "guest", "run.py"),
             "--kernel", a.kernel, "--lab", os.path.join(TOP, "bench", "lab", "daemon", "events_lab.sh"),
             "--program", os.path.join(a.bin_dir, "sockbufd"),
             "--program", os.path.join(a.bin_dir, "sockbuf_cut_publisher"),
             "--param", "lab_secs=6", "--timeout", "300", "--log", log],
            capture_output=True, text=True, timeout=420)
        if "is not in" in r.stderr + r.stdout:
            return rp.skip(f"kernel {a.kernel} not in the cache")
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
    rp.check(r.returncode == 0 and "@@ lab rc 0" in text,
             f"guest: run.py exit {r.returncode}, lab finished")
    rp.check("events on (one program set for the host)" in text,
             "events: the daemon says events are on")
    rp.check(metric(text, "sockbuf_event_source_up") == 1, "events: source up")
    by_event = metric(text, "sockbuf_restores_total", found="event") or 0
    lost = metric(text, "sockbuf_event_records_lost_total")
    count = metric(text, "sockbuf_below_floor_seconds_count") or 0
    rp.check(by_event >= 1 and lost == 0,
             f"restores: {by_event:.0f} from records, {lost} records lost")
    rp.check(count == by_event, f"restores: {count:.0f} in the histogram of {by_event:.0f}")
    wait = metric(text, "sockbuf_event_wait_seconds_max") or 0
    buckets = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
    le = next((b for b in buckets if b >= BOUND_S + wait), None)
    within = metric(text, "sockbuf_below_floor_seconds_bucket", le=str(le)) if le else None
    rp.check(count >= 1 and within == count,
             f"bound: {within} of {count:.0f} cuts below the floor <= {le} s "
             f"(50 ms + the longest wait, {wait * 1000:.1f} ms)")
    return rp.verdict()


if __name__ == "__main__":
    sys.exit(main())

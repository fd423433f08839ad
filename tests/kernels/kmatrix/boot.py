"""Boot one kernel under qemu (TCG, no network card) and collect its output."""
import os
import selectors
import shutil
import subprocess
import time

from .console import Collector


class BootError(Exception):
    pass


def qemu_command(vmlinuz, initrd, params, smp=2, mem_mb=1024):
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        raise BootError("qemu-system-x86_64 is missing (package qemu-system-x86)")
    # schedstats=enable: the contract suite's judge reads each guard
    # thread's time blocked (sum_block_runtime of /proc/<pid>/task/<tid>/sched),
    # which the kernel keeps only with schedstats on (a guest-wide setting).
    append = "console=ttyS0 panic=-1 quiet loglevel=1 schedstats=enable " + " ".join(
        "%s=%s" % kv for kv in sorted(params.items()))
    return [qemu, "-accel", "tcg", "-nographic", "-no-reboot", "-nic", "none",
            "-m", str(mem_mb), "-smp", str(smp), "-cpu", "max",
            "-kernel", vmlinuz, "-initrd", initrd, "-append", append]


def run_guest(cmd, timeout, log_path, progress):
    """Run qemu; returns (Collector, exit code or None on time-out)."""
    col = Collector(on_step=lambda s: progress("guest:" + s))
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    pending = b""
    timed_out = False
    with open(log_path, "wb") as log:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not sel.select(timeout=min(left, 1.0)):
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            log.write(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for ln in lines:
                col.feed(ln.decode("utf-8", "replace"))
        if pending:
            col.feed(pending.decode("utf-8", "replace"))
    if timed_out:
        proc.kill()
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    return col, (None if timed_out else rc)

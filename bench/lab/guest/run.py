#!/usr/bin/env python3
"""Boot a kernel of the matrix's cache (or a bzImage) under qemu TCG with
lab programs and a lab script, and print its console.

  bench/lab/guest/run.py --kernel 6.12-deb13 --lab bench/lab/guard_events/idle.sh \
      --program build/bin/sockbuf_guard_idle_cost --param lab_secs=60 --log out.txt

--kernel names a folder under CACHE/extract by a kernel of
tests/kernels/matrix.txt (run tests/kernels/run-matrix once to fill the
cache), or a path to a bzImage built with everything in it.  Kernel
command line parameters lab_*=... reach the lab script as variables.  The
guest has no network card and changes only itself: settings a lab makes
(tcp_mem, BPF statistics) die with it."""
import argparse
import glob
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "kernels"))
from kmatrix import boot, image, matrix  # noqa: E402


def find_kernel(name, cache):
    """(vmlinuz, module root or None, release) for @name."""
    if os.path.isfile(name):
        return name, None, None
    table = os.path.join(HERE, "..", "..", "..", "tests", "kernels", "matrix.txt")
    for e in matrix.load(table):
        if e.name != name or e.is_host:
            continue
        for d in sorted(glob.glob(os.path.join(cache, "extract", "*"))):
            if not re.match(e.package, os.path.basename(d).split("_")[0]):
                continue
            # As run-matrix unpacked it (kmatrix/image.py extract()).
            for mods in sorted(glob.glob(os.path.join(d, "lib", "modules", "*")), reverse=True):
                release = os.path.basename(mods)
                for vm in (os.path.join(d, "boot", "vmlinuz-" + release),
                           os.path.join(mods, "vmlinuz")):
                    if os.path.isdir(os.path.join(mods, "kernel")) and os.path.exists(vm):
                        return vm, d, release
        raise SystemExit("run: %s is not in %s/extract yet: run tests/kernels/run-matrix "
                         "--full --only %s once" % (name, cache, name))
    raise SystemExit("run: no kernel %s in tests/kernels/matrix.txt and no such file" % name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--lab", required=True, help="shell script run in the guest")
    ap.add_argument("--program", action="append", default=[], help="host binary to copy")
    ap.add_argument("--param", action="append", default=[], help="lab_NAME=VALUE")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/sockbuf-kernels"))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--mem", type=int, default=1024)
    ap.add_argument("--log", required=True, help="the console, written as it comes")
    a = ap.parse_args()
    params = {}
    for p in a.param:
        k, sep, v = p.partition("=")
        if not sep or not k.startswith("lab_") or " " in v:
            raise SystemExit("run: --param wants lab_NAME=VALUE without spaces, got %r" % p)
        params[k] = v
    vmlinuz, kroot, release = find_kernel(a.kernel, a.cache)
    programs = {os.path.basename(p): p for p in a.program}
    programs["lab.sh"] = a.lab
    programs["lab-net.sh"] = os.path.join(HERE, "net.sh")  # the rpc labs' namespaces
    initrd = os.path.join(a.cache, "images", "lab-%d.cpio.gz" % os.getpid())
    os.makedirs(os.path.dirname(initrd), exist_ok=True)
    # A packaged kernel brings the matrix's modules (veth, netem, tbf,
    # inet_diag); a built one has everything in it.
    _, mods, missing = image.build_initramfs(initrd, kroot, release, programs,
                                             os.path.join(HERE, "init.sh"))
    if missing:
        print("run: modules not in the package: %s" % ", ".join(missing), flush=True)
    cmd = boot.qemu_command(vmlinuz, initrd, params, smp=a.smp, mem_mb=a.mem)
    print("run: %s, timeout %d s" % (" ".join(cmd[-6:-2]), a.timeout), flush=True)
    t0 = time.monotonic()
    last = [t0]

    def progress(s):
        now = time.monotonic()
        if now - last[0] >= 30:
            print("run: %.0f s in the guest" % (now - t0), flush=True)
            last[0] = now
    try:
        _, rc = boot.run_guest(cmd, a.timeout, a.log, progress)
    finally:
        os.unlink(initrd)
    print("run: guest ended after %.0f s, qemu %s; console in %s" % (
        time.monotonic() - t0, "timed out" if rc is None else "rc %d" % rc, a.log))
    return 1 if rc is None else 0


if __name__ == "__main__":
    sys.exit(main())

"""Extract a kernel package and build the guest's initramfs."""
import glob
import os
import shutil
import subprocess

# sch_tbf: the contract suite's shaped scenario; inet_diag and tcp_diag: its
# inet_diag sampler (without them its C7 raw check is skipped).
GUEST_MODULES = ["veth", "sch_netem", "sch_tbf", "inet_diag", "tcp_diag"]
# Dynamically linked programs are copied with the libraries ldd lists.
IPROUTE = ["ip", "tc"]


class ImageError(Exception):
    pass


def unpack_once(debs, dest, finish=None):
    """Unpack the .debs into dest, then call finish(dest), unless a complete
    unpack is already there (marked by .extracted); a partial one is redone."""
    done = os.path.join(dest, ".extracted")
    if os.path.exists(done):
        return
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
    if finish:
        finish(dest)
    open(done, "w").close()


def _merged_usr_lib(dest):
    # Merged /usr (trixie, sid): depmod -b looks in lib/modules.
    if not os.path.exists(os.path.join(dest, "lib")) and os.path.isdir(
            os.path.join(dest, "usr", "lib")):
        os.symlink("usr/lib", os.path.join(dest, "lib"))


def extract(debs, dest):
    """Unpack the .debs into dest once; returns (release, vmlinuz path)."""
    unpack_once(debs, dest, _merged_usr_lib)
    mods = sorted(glob.glob(os.path.join(dest, "lib", "modules", "*")))
    mods = [m for m in mods if os.path.isdir(os.path.join(m, "kernel"))]
    if not mods:
        raise ImageError("no lib/modules/<release>/kernel in the package")
    release = os.path.basename(mods[-1])
    for cand in (os.path.join(dest, "boot", "vmlinuz-" + release),
                 os.path.join(mods[-1], "vmlinuz")):
        if os.path.exists(cand):
            return release, cand
    raise ImageError("no vmlinuz for %s in the package" % release)


def _sbin_tool(name):
    """kmod's tools live in /usr/sbin, which a root shell without a login
    (su, sudo -E) may not have in PATH; run-matrix's check_tools() looks
    there too."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") or name


def depmod(root, release):
    """Debian ships no modules.dep: make it, once."""
    if os.path.exists(os.path.join(root, "lib", "modules", release, "modules.dep")):
        return
    r = subprocess.run([_sbin_tool("depmod"), "-b", root, release], capture_output=True, text=True)
    if r.returncode != 0:
        raise ImageError("depmod -b %s %s failed (exit %d): %s"
                         % (root, release, r.returncode, r.stderr.strip()[-400:]))


def module_files(root, release, names):
    """Module files to load, dependencies first, builtins left out."""
    r = subprocess.run([_sbin_tool("modprobe"), "-d", root, "-S", release, "--show-depends", "-a"] + names,
                       capture_output=True, text=True)
    files = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "insmod" and parts[1] not in files:
            files.append(parts[1])
    missing = [n for n in names if not any(
        os.path.basename(f).split(".ko")[0].replace("-", "_") == n for f in files)]
    builtin_txt = os.path.join(root, "lib", "modules", release, "modules.builtin")
    builtin = open(builtin_txt).read() if os.path.exists(builtin_txt) else ""
    missing = [n for n in missing if "/%s.ko" % n not in builtin]
    return files, missing


def _copy_module(src, dst_dir, index):
    base = os.path.basename(src)
    name = base.split(".ko")[0]
    out = os.path.join(dst_dir, "%02d-%s.ko" % (index, name))
    if base.endswith(".ko.xz"):
        with open(out, "wb") as f:
            subprocess.run(["xz", "-dc", src], stdout=f, check=True)
    elif base.endswith(".ko.zst"):
        with open(out, "wb") as f:
            subprocess.run(["zstd", "-dc", src], stdout=f, check=True)
    elif base.endswith(".ko.gz"):
        with open(out, "wb") as f:
            subprocess.run(["gzip", "-dc", src], stdout=f, check=True)
    else:
        shutil.copy(src, out)
    return os.path.basename(out)


def _ldd_libs(binary):
    r = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if "not a dynamic executable" in r.stdout + r.stderr:
        return []
    libs = []
    for line in r.stdout.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                libs.append(p)
    return libs


def _add_program(root, src, name=None, where="usr/bin"):
    dst = os.path.join(root, where, name or os.path.basename(src))
    shutil.copy(src, dst)
    os.chmod(dst, 0o755)
    for lib in _ldd_libs(src):
        real = os.path.realpath(lib)
        tgt = os.path.join(root, lib.lstrip("/"))
        os.makedirs(os.path.dirname(tgt), exist_ok=True)
        if not os.path.exists(tgt):
            shutil.copy(real, tgt)


def build_initramfs(out, kroot, release, programs, init_script, guest_modules=None,
                    extra_modules=(), trees=None):
    """programs: {name in guest: host path}.  guest_modules: names resolved
    from the package in kroot (default GUEST_MODULES; kroot None: none, a
    kernel with everything built in); extra_modules: .ko files loaded after
    them; trees: {folder in guest: host folder} copied whole.  Returns
    (path, module list, names missing)."""
    work = out + ".d"
    if os.path.exists(work):
        shutil.rmtree(work)
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "run", "modules", "lib64",
              "sys/fs/cgroup", "etc", "usr/bin", "usr/sbin"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    busybox = shutil.which("busybox")
    if not busybox or _ldd_libs(busybox):
        raise ImageError("a statically linked busybox is needed (package busybox-static)")
    shutil.copy(busybox, os.path.join(work, "bin", "busybox"))
    os.symlink("busybox", os.path.join(work, "bin", "sh"))
    shutil.copy(init_script, os.path.join(work, "init"))
    os.chmod(os.path.join(work, "init"), 0o755)
    for tool in IPROUTE:
        path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
        if not path:
            raise ImageError("iproute2's %s is missing (package iproute2)" % tool)
        _add_program(work, path, where="usr/sbin")
    for name, path in programs.items():
        _add_program(work, path, name)
    for where, src in (trees or {}).items():
        shutil.copytree(src, os.path.join(work, where.strip("/")), symlinks=True)

    files, missing = [], []
    if kroot is not None:
        depmod(kroot, release)
        files, missing = module_files(kroot, release,
                                      GUEST_MODULES if guest_modules is None else guest_modules)
    files += list(extra_modules)
    order = [_copy_module(f, os.path.join(work, "modules"), i) for i, f in enumerate(files)]
    with open(os.path.join(work, "modules", "order"), "w") as f:
        f.write("".join(m + "\n" for m in order))

    with open(out, "wb") as f:
        find = subprocess.Popen(["find", "."], cwd=work, stdout=subprocess.PIPE)
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"], cwd=work,
                                stdin=find.stdout, stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=f)
        find.stdout.close()
        cpio.stdout.close()
        if gz.wait() or cpio.wait() or find.wait():
            raise ImageError("cpio/gzip failed")
    shutil.rmtree(work)
    return out, [m.split("-", 1)[1][:-3] for m in order], missing

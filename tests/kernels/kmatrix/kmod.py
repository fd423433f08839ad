"""Build kmod-proposal/module against a guest kernel's Debian headers.

The headers come through the same private apt setup as the kernel image:
linux-headers-<abi> and the packages its Depends line names with exact
versions (linux-headers-<abi-common>, linux-kbuild-<series>).  They are
extracted once into the cache; the absolute /usr/src and /usr/lib paths
Debian writes into them are pointed at the extracted copy.
"""
import glob
import os
import re
import shutil
import subprocess

from . import image


class KmodError(Exception):
    pass


def _depends(deb):
    """[(name, exact version or None)] of the first alternative of each
    dependency of a .deb."""
    r = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], capture_output=True, text=True, check=True)
    out = []
    for dep in r.stdout.split(","):
        m = re.match(r"\s*([a-z0-9.+-]+)\s*(?:\((=|>=)\s*([^)\s]+)\))?", dep)
        if m:
            out.append((m.group(1), m.group(3) if m.group(2) == "=" else None))
    return out


def headers_name(image_package):
    """linux-image-6.1.0-NN-amd64-unsigned -> linux-headers-6.1.0-NN-amd64."""
    m = re.match(r"linux-(?:image|binary)-(.*?)(-unsigned)?$", image_package)
    if not m:
        raise KmodError("cannot derive a headers package from %s" % image_package)
    return "linux-headers-" + m.group(1)


def fetch_headers(apt, image_package, image_version, suites, cache):
    """Extracted headers tree for the image; returns its kernel build dir."""
    name = headers_name(image_package)
    path, _ = apt.download(name, image_version)
    debs = [path]
    for dep, version in _depends(path):
        if not dep.startswith(("linux-headers-", "linux-kbuild-")):
            continue
        if version is None:
            found = apt.version_of(dep, suites)
            if not found:
                raise KmodError("%s (needed by %s) not found in %s" % (dep, name, ",".join(suites)))
            version = found[1]
        debs.append(apt.download(dep, version)[0])
    root = os.path.join(cache, "headers", "%s_%s" % (name, image_version.replace(":", "%3a")))
    image.unpack_once(debs, root, _relocate)
    kdir = os.path.join(root, "usr", "src", name)
    if not os.path.isfile(os.path.join(kdir, "Makefile")):
        raise KmodError("no usr/src/%s/Makefile in the headers packages" % name)
    return kdir


def _relocate(root):
    """Point the absolute paths Debian's headers use into root."""
    for mk in glob.glob(os.path.join(root, "usr", "src", "linux-headers-*", "Makefile")):
        text = open(mk).read()
        fixed = re.sub(r"(include|MAKEFLAGS \+= -I|srctree :=|-C) /usr/", r"\1 %s/usr/" % root, text)
        if fixed != text:
            with open(mk, "w") as f:
                f.write(fixed)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                target = os.readlink(p)
                if target.startswith("/usr/"):
                    os.unlink(p)
                    os.symlink(root + target, p)


def build(src, kdir, out_dir, log_path):
    """make -C kdir M=<copy of src> modules; returns the .ko path."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    shutil.copytree(src, out_dir)
    with open(log_path, "w") as log:
        r = subprocess.run(["make", "-C", kdir, "M=" + out_dir, "modules"],
                           stdout=log, stderr=subprocess.STDOUT)
    kos = glob.glob(os.path.join(out_dir, "*.ko"))
    if r.returncode != 0 or len(kos) != 1:
        # The log stays on the runner: its end goes into the reason,
        # which CI prints.
        with open(log_path, errors="replace") as log:
            tail = log.read()[-1500:]
        raise KmodError("module build failed (make rc %d, %d .ko, log %s), its end:\n%s"
                        % (r.returncode, len(kos), log_path, tail))
    return kos[0]

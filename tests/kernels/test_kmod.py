#!/usr/bin/env python3
"""Self-tests of run-matrix --kmod's pieces that need no qemu and no
network: headers package names, Depends parsing, relocation of Debian's
absolute header paths, and an initramfs without package modules."""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from kmatrix import image, kmod  # noqa: E402


def make_deb(folder, name, depends):
    """A minimal .deb with a Depends line, built with dpkg-deb."""
    root = os.path.join(folder, name)
    os.makedirs(os.path.join(root, "DEBIAN"))
    with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
        f.write("Package: %s\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t.invalid>\n"
                "Description: t\nDepends: %s\n" % (name, depends))
    deb = root + ".deb"
    subprocess.run(["dpkg-deb", "--build", root, deb], check=True, capture_output=True)
    return deb


class HeadersNameTest(unittest.TestCase):
    def test_image_names_map_to_headers(self):
        self.assertEqual(kmod.headers_name("linux-image-6.1.0-57-amd64"),
                         "linux-headers-6.1.0-57-amd64")
        self.assertEqual(kmod.headers_name("linux-image-6.12.118+deb12-amd64-unsigned"),
                         "linux-headers-6.12.118+deb12-amd64")

    def test_other_names_are_refused(self):
        with self.assertRaises(kmod.KmodError):
            kmod.headers_name("linux-headers-6.1.0-57-amd64")


@unittest.skipUnless(shutil.which("dpkg-deb"), "dpkg-deb missing")
class DependsTest(unittest.TestCase):
    def test_exact_and_open_versions(self):
        with tempfile.TemporaryDirectory() as d:
            deb = make_deb(d, "linux-headers-x", "linux-headers-x-common (= 6.1.192-3), "
                           "linux-kbuild-6.1 (>= 6.1.192-3), linux-compiler-gcc-12-x86, "
                           "linux-image-x (= 1) | linux-image-x-unsigned (= 1)")
            self.assertEqual(kmod._depends(deb), [
                ("linux-headers-x-common", "6.1.192-3"), ("linux-kbuild-6.1", None),
                ("linux-compiler-gcc-12-x86", None), ("linux-image-x", "1")])


class RelocateTest(unittest.TestCase):
    def test_include_line_and_absolute_links_point_into_the_root(self):
        with tempfile.TemporaryDirectory() as root:
            src = os.path.join(root, "usr", "src", "linux-headers-x")
            os.makedirs(src)
            with open(os.path.join(src, "Makefile"), "w") as f:
                f.write("include /usr/src/linux-headers-x-common/Makefile\n")
            os.symlink("/usr/lib/linux-kbuild-6.1/scripts", os.path.join(src, "scripts"))
            os.symlink("../../lib/linux-kbuild-6.1/tools", os.path.join(src, "tools"))
            kmod._relocate(root)
            self.assertEqual(open(os.path.join(src, "Makefile")).read(),
                             "include %s/usr/src/linux-headers-x-common/Makefile\n" % root)
            self.assertEqual(os.readlink(os.path.join(src, "scripts")),
                             root + "/usr/lib/linux-kbuild-6.1/scripts")
            # Relative links already stay inside the root.
            self.assertEqual(os.readlink(os.path.join(src, "tools")),
                             "../../lib/linux-kbuild-6.1/tools")


def busybox_static():
    b = shutil.which("busybox")
    return b and not image._ldd_libs(b) and shutil.which("cpio")


@unittest.skipUnless(busybox_static(), "busybox-static or cpio missing")
class LocalImageTest(unittest.TestCase):
    def test_no_package_modules_extra_module_and_tree(self):
        with tempfile.TemporaryDirectory() as d:
            ko = os.path.join(d, "sockbuf_kmod.ko")
            open(ko, "wb").write(b"\x7fELF")
            tree = os.path.join(d, "kselftest")
            os.makedirs(os.path.join(tree, "net"))
            open(os.path.join(tree, "run_kselftest.sh"), "w").write("#!/bin/sh\n")
            out = os.path.join(d, "initrd.cpio.gz")
            _, mods, missing = image.build_initramfs(
                out, None, None, {}, os.path.join(HERE, "guest", "kmod-init.sh"),
                guest_modules=[], extra_modules=[ko], trees={"kselftest": tree})
            self.assertEqual(mods, ["sockbuf_kmod"])
            self.assertEqual(missing, [])
            listing = subprocess.run(["cpio", "-t", "--quiet"], input=gzip.open(out).read(),
                                     capture_output=True, check=True).stdout.decode().split()
            for path in ("init", "modules/00-sockbuf_kmod.ko", "modules/order",
                         "kselftest/run_kselftest.sh", "kselftest/net"):
                self.assertIn(path, listing)


if __name__ == "__main__":
    unittest.main()

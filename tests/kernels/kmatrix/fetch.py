"""Kernel packages through a private apt configuration.

The system's own sources stay untouched: apt runs with its source list,
lists, cache and status pointed into the runner's cache folder.  The
archive URIs are taken from the system's configuration (the entry that
serves the Debian release, and the one that serves its security suite),
in whichever layout apt has: deb822 `.sources` files (container images),
the classic `sources.list` (the installer, debootstrap) or
`sources.list.d/*.list`.

As a command, `fetch.py mirror [ETC_APT]` prints the main archive's URI
(packaging/check.sh's debootstrap mirror) or, exit 2, what it looked for.
"""
import glob
import hashlib
import os
import re
import subprocess
import sys
import time

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Where the security suites are fetched from when the apt configuration
# names no security archive: debootstrap and the installer's minimal
# sources.list carry the release alone.
DEFAULT_SECURITY = "http://deb.debian.org/debian-security"
LIST_MAX_AGE = 12 * 3600


class FetchError(Exception):
    pass


ETC_APT = "/etc/apt"


def _resolve_mirror_list(uri):
    """The first URI of a mirror+file: list (Debian's cloud images), which
    apt reads and debootstrap cannot; other URIs as they are."""
    if not uri.startswith("mirror+file:"):
        return uri
    path = uri[len("mirror+file:"):]
    if path.startswith("//"):
        path = path[2:]
    try:
        with open(path, errors="replace") as f:
            for line in f:
                words = line.split()
                if words and not words[0].startswith("#"):
                    return words[0]
    except OSError:
        pass
    return uri


def _source_paths(etc):
    return [os.path.join(etc, "sources.list")] + sorted(
        glob.glob(os.path.join(etc, "sources.list.d", "*")))


def _system_sources(etc=ETC_APT):
    """(uri, suite, signed_by) of every deb entry the apt configuration in
    @etc has."""
    found = []
    paths = _source_paths(etc)
    for path in paths:
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            text = f.read()
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if ":" in line and not line.startswith((" ", "#")):
                        k, v = line.split(":", 1)
                        fields[k.strip().lower()] = v.strip()
                if "deb" not in fields.get("types", "").split():
                    continue
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        found.append((uri, suite, fields.get("signed-by", KEYRING)))
        elif path.endswith(".list"):
            for line in text.splitlines():
                m = re.match(r"\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
                if m:
                    found.append((m.group(2), m.group(3), KEYRING))
    return found


def archive_uris(etc=ETC_APT):
    """URIs of the main Debian archive and of its security archive."""
    main = security = None
    for uri, suite, _ in _system_sources(etc):
        uri = _resolve_mirror_list(uri)
        if "/debian" not in uri:
            continue
        if suite.endswith("-security"):
            security = security or uri
        elif re.fullmatch(r"[a-z]+", suite):
            main = main or uri
    if not main:
        raise FetchError(
            "no Debian archive entry (a deb entry whose URI has /debian and whose suite "
            "is a release name such as bookworm) in %s/sources.list, "
            "%s/sources.list.d/*.list or %s/sources.list.d/*.sources" % (etc, etc, etc))
    return main, security


class Apt:
    def __init__(self, cache_dir, suites, log, etc=ETC_APT):
        self.debs = os.path.join(cache_dir, "debs")
        self.log = log
        self._all_names = None
        main, security = archive_uris(etc)
        wanted = sorted(s for s in set(suites) if s.endswith("-security"))
        if wanted and not security:
            security = DEFAULT_SECURITY
            log("no security archive in the apt sources; %s from %s" %
                (", ".join(wanted), security))
        lines = []
        for suite in sorted(set(suites)):
            uri = security if suite.endswith("-security") else main
            if uri:
                lines.append("deb [signed-by=%s] %s %s main" % (KEYRING, uri, suite))
        text = "\n".join(lines) + "\n"
        # One apt state per source list: runs with other matrix files never
        # replace each other's lists, even side by side.
        key = hashlib.sha256(text.encode()).hexdigest()[:12]
        self.root = os.path.join(cache_dir, "apt", key)
        for d in ("lists/partial", "cache/archives/partial", "etc"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        os.makedirs(self.debs, exist_ok=True)
        self.sourcelist = os.path.join(self.root, "etc", "sources.list")
        if not os.path.exists(self.sourcelist):
            with open(self.sourcelist, "w") as f:
                f.write(text)
        self.opts = [
            "-o", "Dir::Etc::sourcelist=" + self.sourcelist,
            "-o", "Dir::Etc::sourceparts=-",
            "-o", "Dir::State::Lists=" + os.path.join(self.root, "lists"),
            "-o", "Dir::Cache=" + os.path.join(self.root, "cache"),
            # Named explicitly, apt keeps its parsed cache between calls
            # (otherwise every apt-cache call parses all lists again).
            "-o", "Dir::Cache::pkgcache=" + os.path.join(self.root, "cache", "pkgcache.bin"),
            "-o", "Dir::Cache::srcpkgcache=" + os.path.join(self.root, "cache", "srcpkgcache.bin"),
            "-o", "Dir::State::status=/dev/null",
            "-o", "APT::Sandbox::User=root",
            # A frozen mirror or snapshot serves sid (and the others, in
            # time) with a Release file past its Valid-Until, which apt
            # refuses; the signatures are still checked, and the matrix
            # names the exact version it booted in its results.
            "-o", "Acquire::Check-Valid-Until=false",
        ]

    def _stamp(self, remove=False):
        path = os.path.join(self.root, "updated")
        if remove:
            if os.path.exists(path):
                os.unlink(path)
            return None
        return path

    def update(self, force=False):
        """Refresh the private lists when older than LIST_MAX_AGE."""
        stamp = self._stamp()
        fresh = os.path.exists(stamp) and time.time() - os.path.getmtime(stamp) < LIST_MAX_AGE
        if fresh and not force:
            return "cached"
        r = subprocess.run(["apt-get"] + self.opts + ["-q", "update"],
                           capture_output=True, text=True)
        have_lists = bool(glob.glob(os.path.join(self.root, "lists", "*_Packages*")))
        if r.returncode != 0 or "Err:" in r.stdout:
            if not have_lists:
                raise FetchError("apt-get update failed: " + (r.stderr or r.stdout).strip()[-400:])
            self.log("apt-get update failed; using the lists fetched before")
            return "stale"
        open(stamp, "w").close()
        return "updated"

    def _names(self):
        """Every package name in the private lists (apt-cache pkgnames is
        fast: no descriptions are read), once per run."""
        if self._all_names is None:
            r = subprocess.run(["apt-cache"] + self.opts + ["pkgnames", "linux-"],
                               capture_output=True, text=True)
            self._all_names = r.stdout.split()
        return self._all_names

    def candidates(self, pattern, suites):
        """[(name, version, suite)] of packages matching pattern in suites."""
        names = sorted(n for n in self._names() if re.search(pattern, n))
        if not names:
            return []
        r = subprocess.run(["apt-cache"] + self.opts + ["madison"] + names,
                           capture_output=True, text=True)
        out = []
        for ln in r.stdout.splitlines():
            cols = [c.strip() for c in ln.split("|")]
            if len(cols) < 3:
                continue
            suite = cols[2].split()[1].split("/")[0] if len(cols[2].split()) > 1 else ""
            if suite in suites:
                out.append((cols[0], cols[1], suite))
        return out

    def newest(self, cands):
        """The candidate with the highest version (dpkg's ordering)."""
        best = None
        for c in cands:
            if best is None or subprocess.run(
                    ["dpkg", "--compare-versions", c[1], "gt", best[1]]).returncode == 0:
                best = c
        return best

    def version_of(self, name, suites):
        return self.newest([c for c in self.candidates("^%s$" % re.escape(name), suites)
                            if c[0] == name])

    def deb_path(self, name, version):
        """The .deb in the cache: amd64, or 'all' (headers -common packages)."""
        stem = os.path.join(self.debs, "%s_%s_" % (name, version.replace(":", "%3a")))
        for arch in ("amd64", "all"):
            if os.path.exists(stem + arch + ".deb"):
                return stem + arch + ".deb"
        return stem + "amd64.deb"

    def download(self, name, version):
        """Path of the .deb, fetched only when the cache lacks it."""
        path = self.deb_path(name, version)
        if os.path.exists(path):
            return path, False
        r = subprocess.run(["apt-get"] + self.opts + ["-q", "download", "%s=%s" % (name, version)],
                           cwd=self.debs, capture_output=True, text=True)
        path = self.deb_path(name, version)
        if r.returncode != 0 or not os.path.exists(path):
            raise FetchError("apt-get download %s=%s failed: %s" % (
                name, version, (r.stderr or r.stdout).strip()[-400:]))
        return path, True


def main(argv):
    if len(argv) in (1, 2) and argv[0] == "mirror":
        try:
            print(archive_uris(argv[1] if len(argv) == 2 else ETC_APT)[0])
        except (FetchError, OSError) as e:
            print("fetch.py mirror: %s" % e, file=sys.stderr)
            return 2
        return 0
    print("usage: fetch.py mirror [ETC_APT]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Real vmlinux files with full DWARF: Debian's linux-image-*-dbg packages, fetched once.

No version is pinned here: a pin stops working the day Debian's archive drops that ABI. What is
fetched is the newest ``linux-image-*-cloud-amd64-dbg`` apt knows (``apt-get update`` first when
its lists are empty, as in the Docker image), with ``apt-get download``, which checks the .deb
against the SHA256 of the archive's signed Packages index; the .deb is checked once more against
that same SHA256 from ``apt-cache show``, only usr/lib/debug/boot/vmlinux-* is extracted into the
sizewatch cache, and the package, version and SHA256 actually used are recorded beside it
(``package.json``). Later calls return a cached image (the newest one cached, checked against its
recorded version's banner) without asking the archive, so a machine keeps reading the same bytes
until its cache is emptied. ``SIZEWATCH_DBG_PACKAGE=linux-image-...-dbg`` asks for one package.

What the tests expect of the image is never written down per version: they compute it from
independent tools on the file itself (tests/dbg_oracles.py).
"""
from __future__ import annotations

import functools
import hashlib
import json
import mmap
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from toolchains.locks import file_lock  # noqa: E402
from toolchains.source import cache_dir  # noqa: E402

FLAVOUR = "cloud-amd64"


class Unavailable(RuntimeError):
    """No dbg image can be had here (the archive is unreachable, or knows no such package)."""


@dataclass(frozen=True)
class Package:
    """One dbg image package as apt's signed metadata describes it."""
    name: str
    version: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Image:
    """A dbg vmlinux in the cache and the package it came from."""
    path: Path
    package: str
    version: str
    sha256: str | None           # of the .deb, from apt's metadata (None: fetched before it was recorded)


def _debian_version_key(a: str, b: str) -> int:
    if a == b:
        return 0
    return -1 if subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0 else 1


def _apt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True)


def _stanzas(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(m.groups() for m in re.finditer(r"^([\w-]+): ?(.*)$", block, re.M))
        if "Package" in fields:
            out.append(fields)
    return out


@functools.lru_cache(maxsize=4)
def available(flavour: str = FLAVOUR) -> tuple[Package, ...]:
    """The dbg image packages apt knows for this flavour, oldest Debian version first (the
    metapackages that only depend on one of them left out). Runs ``apt-get update`` once when apt
    knows none (empty lists); an unreachable archive is an ``Unavailable`` in one line."""
    pat = re.compile(rf"^linux-image-(.+)-{re.escape(flavour)}-dbg$")

    def names() -> list[str]:
        return sorted(n for n in _apt("apt-cache", "pkgnames", "linux-image-").stdout.split() if pat.match(n))

    found = names()
    if not found:
        upd = _apt("apt-get", "update", "-q")
        errs = upd.stderr.strip().splitlines() or [f"exit status {upd.returncode}"]
        last = next((ln for ln in errs if "Failed to fetch" in ln or "Could not" in ln), errs[-1])
        if upd.returncode or re.search(r"^(W|E): (Failed to fetch|Some index files failed)", upd.stderr, re.M):
            raise Unavailable(f"the Debian archive is unreachable (apt-get update: {last})")
        found = names()
        if not found:
            raise Unavailable(f"apt knows no linux-image-*-{flavour}-dbg package after apt-get update "
                              f"(is Debian's main component in the apt sources?)")
    show = _apt("apt-cache", "show", "--no-all-versions", *found)
    pkgs = []
    for st in _stanzas(show.stdout):
        deps = st.get("Depends", "")
        if any(pat.match(d.split()[0]) for d in deps.split(",") if d.strip()):
            continue                                # a metapackage: linux-image-cloud-amd64-dbg -> the real one
        if not st.get("SHA256") or not st.get("Size", "").isdigit():
            continue
        pkgs.append(Package(st["Package"], st["Version"], st["SHA256"], int(st["Size"])))
    if not pkgs:
        raise Unavailable(f"apt-cache show gave no downloadable linux-image-*-{flavour}-dbg package")
    return tuple(sorted(pkgs, key=functools.cmp_to_key(lambda a, b: _debian_version_key(a.version, b.version))))


def newest(flavour: str = FLAVOUR) -> Package:
    """The newest dbg image package of the archive."""
    return available(flavour)[-1]


def _banner_has(path: Path, version: str) -> bool:
    """The image's banner names the Debian version (``... Debian 6.1.192-2 (date)``)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(f" Debian {version} (".encode()) >= 0


def _banner_version(path: Path) -> str | None:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        at = m.find(b"Linux version ")
        line = m[at:at + 512].split(b"\0", 1)[0].decode(errors="replace") if at >= 0 else ""
    found = re.search(r" Debian (\S+) \(", line)
    return found.group(1) if found else None


def _cached_image(dest: Path) -> Image | None:
    """The image under ``dest`` if it is complete and its banner agrees with its record. An image
    fetched before records were written gets one made from its banner (sha256 unknown)."""
    done, rec = dest / "vmlinux", dest / "package.json"
    if not done.is_file():
        return None
    if rec.is_file():
        meta = json.loads(rec.read_text())
    else:
        version = _banner_version(done)
        if not version:
            return None
        meta = {"package": dest.name, "version": version, "sha256": None,
                "note": "fetched before package.json was written: version read from the image's banner"}
        rec.write_text(json.dumps(meta, indent=1) + "\n")
    if meta.get("package") != dest.name or not _banner_has(done, meta["version"]):
        return None
    return Image(done, meta["package"], meta["version"], meta.get("sha256"))


def cached(flavour: str = FLAVOUR) -> Image | None:
    """The newest dbg image already in the cache, without asking the archive (benches use one only
    when someone fetched it before)."""
    root = cache_dir() / "dbg"
    pat = re.compile(rf"^linux-image-(.+)-{re.escape(flavour)}-dbg$")
    imgs = [img for d in (sorted(root.iterdir()) if root.is_dir() else []) if pat.match(d.name)
            if (img := _cached_image(d))]
    if not imgs:
        return None
    return max(imgs, key=functools.cmp_to_key(lambda a, b: _debian_version_key(a.version, b.version)))


def fetch(pkg: Package) -> Image:
    """``pkg``'s vmlinux in the cache: downloaded, checked and extracted on first use."""
    dest = cache_dir() / "dbg" / pkg.name
    if (img := _cached_image(dest)) and img.version == pkg.version:
        return img
    dest.mkdir(parents=True, exist_ok=True)
    with file_lock(dest / ".lock"):
        if (img := _cached_image(dest)) and img.version == pkg.version:
            return img
        for old in [*dest.glob("*.deb"), dest / "vmlinux", dest / "package.json"]:
            old.unlink(missing_ok=True)
        got = subprocess.run(["apt-get", "download", "-q", f"{pkg.name}={pkg.version}"], cwd=dest,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if got.returncode:
            last = (got.stderr.strip().splitlines() or [str(got.returncode)])[-1]
            raise Unavailable(f"apt-get download {pkg.name}={pkg.version} failed: {last}")
        (deb,) = dest.glob("*.deb")
        h = hashlib.sha256()
        with open(deb, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        if h.hexdigest() != pkg.sha256:         # apt-get checked it already: a second look, same source
            deb.unlink()
            raise Unavailable(f"{deb.name}: SHA256 {h.hexdigest()} is not the {pkg.sha256} of apt's signed index")
        tmp = dest / "extract"
        subprocess.run(["rm", "-rf", str(tmp)], check=True)
        tmp.mkdir()
        subprocess.run(f"dpkg-deb --fsys-tarfile '{deb.name}' | tar -x -C extract "
                       f"--wildcards './usr/lib/debug/boot/vmlinux-*'", shell=True, cwd=dest, check=True)
        (img,) = (tmp / "usr/lib/debug/boot").glob("vmlinux-*")
        img.rename(dest / "vmlinux")
        subprocess.run(["rm", "-rf", str(tmp), str(deb)], check=True)
        meta = {"package": pkg.name, "version": pkg.version, "sha256": pkg.sha256,
                "source": "apt-get download, checked against the archive's signed Packages index"}
        (dest / "package.json").write_text(json.dumps(meta, indent=1) + "\n")
    img = _cached_image(dest)
    if img is None:
        raise Unavailable(f"{dest / 'vmlinux'}: its banner does not name Debian {pkg.version}")
    return img


def image(package: str | None = None) -> Image:
    """The dbg image the tests and benches read: ``package`` (or ``$SIZEWATCH_DBG_PACKAGE``) at
    the newest version apt knows; else the newest one already cached; else the archive's newest,
    fetched now."""
    package = package or os.environ.get("SIZEWATCH_DBG_PACKAGE") or None
    if package:
        dest = cache_dir() / "dbg" / package
        known = [p for p in available(_flavour_of(package)) if p.name == package]
        if known:
            return fetch(known[-1])
        if img := _cached_image(dest):           # the archive dropped it: the cached copy still reads
            return img
        raise Unavailable(f"apt knows no {package} (apt-cache show; the archive may have dropped it)")
    return cached() or fetch(newest())


def _flavour_of(package: str) -> str:
    for flavour in (FLAVOUR, "amd64", "rt-amd64"):
        if package.endswith(f"-{flavour}-dbg"):
            return flavour
    raise Unavailable(f"{package}: not a linux-image-*-<flavour>-dbg package name")


def vmlinux(package: str | None = None) -> Path:
    """Path of ``image(package)``'s vmlinux."""
    return image(package).path


def main() -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Fetch Debian dbg vmlinux files into the sizewatch cache and print "
                                             "their paths and versions.")
    ap.add_argument("package", nargs="*", help="dbg package names (default: the one the tests read)")
    ap.add_argument("--list", action="store_true", help="list the dbg packages apt knows, oldest first")
    ap.add_argument("--newest", action="store_true", help="fetch the archive's newest, whatever is cached")
    args = ap.parse_args()
    try:
        if args.list:
            for p in available():
                print(p.name, p.version, p.size)
            return 0
        for img in ([fetch(newest())] if args.newest else [image(n) for n in (args.package or [None])]):
            print(img.path, img.package, img.version)
    except (Unavailable, OSError, subprocess.CalledProcessError) as e:
        print(f"dbg_vmlinux: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Real vmlinux files with full DWARF: Debian's linux-image-*-dbg packages, fetched once.

``apt-get download`` the package, at the version pinned below, into the sizewatch cache,
check the .deb's SHA256 and extract only usr/lib/debug/boot/vmlinux-*; later calls return the
cached file (checked against the pinned version's banner). Pinned, so a test or bench reads the
same bytes on every machine and every day; when the Debian archive drops a version, the error
says which pin to move.
"""
from __future__ import annotations

import hashlib
import mmap
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from toolchains.locks import file_lock  # noqa: E402
from toolchains.source import cache_dir  # noqa: E402


def available(flavour: str = "cloud-amd64", series: str = "6.1.0") -> list[str]:
    """Names of the dbg packages apt knows for this flavour, oldest ABI first."""
    out = subprocess.run(["apt-cache", "pkgnames", f"linux-image-{series}-"], capture_output=True,
                         text=True).stdout.split()
    pat = re.compile(rf"linux-image-{re.escape(series)}-(\d+)-{re.escape(flavour)}-dbg$")
    found = sorted((int(m.group(1)), n) for n in out if (m := pat.match(n)))
    return [n for _, n in found]


# package -> (version, SHA256 of the .deb), from `apt-cache show` on bookworm (+ security).
PINNED = {
    "linux-image-6.1.0-47-cloud-amd64-dbg":
        ("6.1.170-3", "7ad48c59de359b78ceec77ab8330fbfa982360c674444a1df7be8eaf11d3863b"),
    "linux-image-6.1.0-53-cloud-amd64-dbg":
        ("6.1.187-1", "22f445ef29ef1262e93f7d786dc5b7303deb056c219eeb420c7ae36500ddb20f"),
    "linux-image-6.1.0-56-cloud-amd64-dbg":
        ("6.1.192-2", "a835edf97e22ec84ddcd4d773596376be9eaae0c5094053b14c8e557cf9d8fb7"),
}


class Unavailable(RuntimeError):
    """The pinned package cannot be fetched here (no apt lists, or the archive dropped it)."""


def _is_version(path: Path, version: str) -> bool:
    """The image's banner names the Debian version (``... Debian 6.1.192-2 (date)``)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(f" Debian {version} (".encode()) >= 0


def cached() -> Path | None:
    """A pinned dbg vmlinux already in the cache (the last pinned one found), without downloading:
    for benches that only use it when someone fetched it before."""
    found = None
    for pkg, (version, _sha) in PINNED.items():
        cand = cache_dir() / "dbg" / pkg / "vmlinux"
        if cand.is_file() and _is_version(cand, version):
            found = cand
    return found


def vmlinux(package: str) -> Path:
    """Path of the vmlinux shipped in ``package`` at its pinned version (downloaded, checked and
    extracted on first use)."""
    if package not in PINNED:
        raise Unavailable(f"{package} is not pinned in bench/dbg_vmlinux.py (PINNED)")
    version, sha256 = PINNED[package]
    dest = cache_dir() / "dbg" / package
    done = dest / "vmlinux"
    if done.exists() and _is_version(done, version):
        return done
    dest.mkdir(parents=True, exist_ok=True)
    with file_lock(dest / ".lock"):
        if done.exists() and _is_version(done, version):
            return done
        for old in dest.glob("*.deb"):
            old.unlink()
        got = subprocess.run(["apt-get", "download", "-q", f"{package}={version}"], cwd=dest,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if got.returncode:
            raise Unavailable(f"apt-get download {package}={version} failed (apt-get update first; if the "
                              f"archive dropped it, move the pin in bench/dbg_vmlinux.py): "
                              f"{got.stderr.strip().splitlines()[-1] if got.stderr.strip() else got.returncode}")
        (deb,) = dest.glob("*.deb")
        h = hashlib.sha256()
        with open(deb, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        if h.hexdigest() != sha256:
            deb.unlink()
            raise Unavailable(f"{deb.name}: SHA256 {h.hexdigest()} is not the pinned {sha256}")
        tmp = dest / "extract"
        tmp.mkdir(exist_ok=True)
        subprocess.run(f"dpkg-deb --fsys-tarfile {deb.name} | tar -x -C extract "
                       f"--wildcards './usr/lib/debug/boot/vmlinux-*'", shell=True, cwd=dest, check=True)
        (img,) = (tmp / "usr/lib/debug/boot").glob("vmlinux-*")
        img.rename(done)
        subprocess.run(["rm", "-rf", str(tmp), str(deb)], check=True)
    return done


def main() -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Fetch pinned Debian dbg vmlinux files into the sizewatch cache "
                                             "and print their paths.")
    ap.add_argument("package", nargs="*", help=f"pinned package names (default: the last two of {', '.join(PINNED)})")
    args = ap.parse_args()
    for name in (args.package or list(PINNED)[-2:]):
        try:
            print(vmlinux(name))
        except (Unavailable, OSError, subprocess.CalledProcessError) as e:
            print(f"dbg_vmlinux: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

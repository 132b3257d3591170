"""Real vmlinux files with full DWARF: Debian's linux-image-*-dbg packages, fetched once.

``apt-get download`` the package into the sizewatch cache and extract only
usr/lib/debug/boot/vmlinux-*; later calls return the cached file.
"""
from __future__ import annotations

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


def vmlinux(package: str) -> Path:
    """Path of the vmlinux shipped in ``package`` (downloaded and extracted on first use)."""
    dest = cache_dir() / "dbg" / package
    done = dest / "vmlinux"
    if done.exists():
        return done
    dest.mkdir(parents=True, exist_ok=True)
    with file_lock(dest / ".lock"):
        if done.exists():
            return done
        for old in dest.glob("*.deb"):
            old.unlink()
        subprocess.run(["apt-get", "download", "-q", package], cwd=dest, check=True,
                       stdout=subprocess.DEVNULL)
        (deb,) = dest.glob("*.deb")
        tmp = dest / "extract"
        tmp.mkdir(exist_ok=True)
        subprocess.run(f"dpkg-deb --fsys-tarfile {deb.name} | tar -x -C extract "
                       f"--wildcards './usr/lib/debug/boot/vmlinux-*'", shell=True, cwd=dest, check=True)
        (img,) = (tmp / "usr/lib/debug/boot").glob("vmlinux-*")
        img.rename(done)
        subprocess.run(["rm", "-rf", str(tmp), str(deb)], check=True)
    return done


if __name__ == "__main__":
    names = available()
    for name in (sys.argv[1:] or names[-2:]):
        print(vmlinux(name))

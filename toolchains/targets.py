"""What a build produces: one object (``mm/page_alloc.o``), a directory (``mm/``) or ``vmlinux``.

A directory target keeps its ``built-in.a`` (kbuild's thin archive) together with every
object it lists, at the same relative paths, so ``sizediff old/mm/built-in.a
new/mm/built-in.a`` reads the members just as in the build dir.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from toolchains.errors import BuildError
from toolchains.layout import atomic_copy

# what is built and reported when not told: the page allocator's object
DEFAULT_TARGETS = ("mm/page_alloc.o",)
_SAFE = re.compile(r"[A-Za-z0-9_.+-]+")                 # a path component, whole (fullmatch)
OUTPUT_SUFFIXES = (".o", ".a", ".ko", ".s", ".lds", ".mod")


@dataclass(frozen=True)
class Target:
    spec: str        # as kbuild names it: mm/page_alloc.o, mm/, vmlinux
    kind: str        # object | dir | vmlinux

    @property
    def output(self) -> str:
        """The file in the build dir (and in the results dir) that stands for the target."""
        if self.kind == "dir":
            return self.spec + "built-in.a"
        return self.spec

    @property
    def directory(self) -> str:
        """The build-dir subdirectory the target's outputs live in ('' for the whole tree)."""
        if self.kind == "vmlinux":
            return ""
        if self.kind == "dir":
            return self.spec.rstrip("/")
        return str(PurePosixPath(self.spec).parent)


LINKED = "vmlinux"


def is_linked(spec: str) -> bool:
    """Whether the target ``spec`` is a linked image (``vmlinux``: read per unit, with link addresses, kept
    vmlinux files pruned, measurable, a whole kernel's build limits) rather than an object or a directory.
    The one place that question is answered (a stored build's target asks it too)."""
    return spec.strip() == LINKED


def parse(spec: str) -> Target:
    """``mm/page_alloc.o`` | ``mm/`` | ``vmlinux``; anything else is a one-line error."""
    s = spec.strip()
    if is_linked(s):
        return Target(s, "vmlinux")
    parts = s.rstrip("/").split("/")
    if not s or s.startswith("/") or any(p in ("", ".", "..") or not _SAFE.fullmatch(p) for p in parts):
        raise BuildError(f"bad target {spec!r}: give an object (mm/page_alloc.o), a directory (mm/) or vmlinux")
    if s.endswith("/"):
        return Target(s, "dir")
    if s.endswith(".o"):
        return Target(s, "object")
    raise BuildError(f"bad target {spec!r}: objects end in .o, directories in / (mm/page_alloc.o, mm/, vmlinux)")


def check_linked_only(specs: list[str], lto: str) -> None:
    """Under LTO (``lto``: ``thin``) every per-unit ``.o`` is LLVM bitcode, so only a linked vmlinux
    can be analysed: an object or directory target is refused in one line, before any build."""
    if not lto:
        return
    for spec in specs:
        t = parse(spec)
        if not is_linked(t.spec):
            raise BuildError(f"under ThinLTO {t.spec} is LLVM bitcode: give --targets vmlinux")


def archive_members(archive: Path, cwd: Path) -> list[str]:
    """Member paths of a thin archive as ``ar t`` run in ``cwd`` lists them (relative to ``cwd``:
    the archive itself stores them relative to its own directory)."""
    proc = subprocess.run(["ar", "t", str(archive.resolve())], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise BuildError(f"{archive}: not a readable archive ({proc.stderr.strip()[:80]})")
    return [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]


def collect(target: Target, build_dir: Path, dest_root: Path) -> Path:
    """Copy a finished target out of the build dir into ``dest_root`` (the commit's results dir).

    Each file goes through a temporary name; for a directory the archive is copied last,
    so its presence means the whole set is there.
    """
    src = build_dir / target.output
    dest = dest_root / target.output
    if target.kind == "dir":
        for member in archive_members(src, build_dir):
            m = build_dir / member
            if not m.exists():
                raise BuildError(f"{target.spec}: archive member {member} missing from {build_dir}")
            rel = os.path.relpath(m, build_dir)
            atomic_copy(m, dest_root / rel)
    return atomic_copy(src, dest)


def remove_partial(build_dir: Path, since: float) -> list[Path]:
    """After a killed make: delete build outputs written since ``since`` anywhere in the build dir
    (the target's objects, but also prepare-stage files like kernel/bounds.s): a truncated file
    must not look up to date to the next make. Returns what was removed."""
    gone: list[Path] = []
    for d, _, files in os.walk(build_dir):
        for f in files:
            if not (f.endswith(OUTPUT_SUFFIXES) or f.startswith("vmlinux")):
                continue
            p = Path(d) / f
            try:
                if p.stat().st_mtime >= since:
                    p.unlink()
                    gone.append(p)
            except FileNotFoundError:
                pass
    return gone

"""Kernel source trees: Debian's linux-source tarballs made into git repositories.

The tarball is unpacked once into the cache and committed, so later stages can
check commits out into worktrees and apply mbox series with ``git am``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.git import GIT_ENV, git
from toolchains.locks import file_lock

READY_MARK = ".git/sizewatch-ready"


def cache_dir() -> Path:
    """Where unpacked trees, build dirs and stores live (SIZEWATCH_CACHE overrides)."""
    env = os.environ.get("SIZEWATCH_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "sizewatch"
    base.mkdir(parents=True, exist_ok=True)
    return base


@dataclass(frozen=True)
class SourceTree:
    path: Path
    version: str
    base_commit: str


@dataclass(frozen=True)
class Tree:
    """A kernel git tree as the store names it: ``linux-6.1`` for Debian's source, else the
    directory name of a user's tree."""
    name: str
    path: Path


def open_tree(spec: str) -> Tree:
    """``6.1`` (Debian's linux-source, made a git tree on first use) or a path to a git tree."""
    p = Path(spec).expanduser()
    if p.exists():
        if not (p / ".git").exists():
            raise BuildError(f"{spec}: not a git tree")
        return Tree(p.resolve().name, p.resolve())
    if re.fullmatch(r"\d+(\.\d+)*", spec):
        return Tree(f"linux-{spec}", ensure_source(spec).path)
    raise BuildError(f"{spec}: no such tree (give a kernel version like 6.1 or a git tree path)")


def strip_debian_gitignore(text: str) -> str:
    """Drop the Debian packaging stanza (``/*`` then ``!/debian/``) that ignores every top-level path."""
    lines = text.splitlines(keepends=True)
    out = [ln for ln in lines if ln.strip() not in ("/*", "!/debian/")]
    return "".join(out)


def tarball_for(version: str) -> Path:
    return Path(f"/usr/src/linux-source-{version}.tar.xz")


def ensure_source(version: str = "6.1", cache: Path | None = None) -> SourceTree:
    """Return the git tree of Debian's linux-source-VERSION, unpacking it on first use.

    Safe against interruption: the tree is built in a temporary directory and
    renamed into place only once committed.
    """
    cache = cache or cache_dir()
    dest = cache / f"linux-{version}"
    if not (dest / READY_MARK).exists():
        with file_lock(cache / f".linux-{version}.lock"):
            if not (dest / READY_MARK).exists():
                _unpack(version, dest, cache)
    return SourceTree(dest, version, git(dest, "rev-list", "--max-parents=0", "HEAD").split()[0])


def debian_version(tree: Path) -> str | None:
    """The Debian linux-source version ``tree`` was made from by ``ensure_source``, else None (a user's
    tree). Such a tree's root commit is the same on every machine, so its commits travel as bundles."""
    try:
        text = (Path(tree) / READY_MARK).read_text().strip()
    except OSError:
        return None
    return text if re.fullmatch(r"\d+(\.\d+)*", text) else None


def _unpack(version: str, dest: Path, cache: Path) -> None:
    tarball = tarball_for(version)
    if not tarball.exists():
        raise BuildError(f"{tarball} not found: install Debian's linux-source-{version}")
    if dest.exists():
        shutil.rmtree(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".linux-{version}-", dir=cache))
    try:
        subprocess.run(["tar", "-xJf", str(tarball), "-C", str(tmp)], check=True)
        (top,) = [p for p in tmp.iterdir() if p.is_dir()]
        gi = top / ".gitignore"
        if gi.exists():
            gi.write_text(strip_debian_gitignore(gi.read_text()))
        git(top, "init", "-q", "-b", "master")
        git(top, "config", "user.name", GIT_ENV["GIT_AUTHOR_NAME"])
        git(top, "config", "user.email", GIT_ENV["GIT_AUTHOR_EMAIL"])
        git(top, "config", "gc.auto", "0")
        git(top, "add", "-A")
        ignored = git(top, "ls-files", "-z", "--others", "--ignored", "--exclude-standard")
        paths = [p for p in ignored.split("\0") if p]
        for i in range(0, len(paths), 500):
            git(top, "add", "-f", "--", *paths[i:i + 500])
        git(top, "commit", "-q", "-m", f"linux-source-{version} as shipped by Debian")
        git(top, "tag", f"debian-{version}")
        (top / READY_MARK).write_text(version + "\n")
        top.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

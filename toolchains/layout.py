"""Where a (tree, toolchain, config) keeps its worktree, build dir and results in the cache.

    <cache>/worktrees/<name>            the commit being built, checked out (never the user's tree)
    <cache>/build/<name>                the persistent kbuild output dir (prepared once)
    <cache>/objects/<tc>/<config>/<sha>/<target>[.remarks|.log|.json]   results per commit

``<name>`` is ``<toolchain>-<config key>`` for the trees sizewatch makes from Debian's
linux-source tarballs (``<cache>/linux-<version>``), and gets a prefix naming the tree for
any other git tree, so two trees never share a worktree or build dir.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from toolchains.kbuild import Config, prepare_lock


@dataclass(frozen=True)
class Layout:
    cache: Path
    tree: Path
    toolchain: str
    config: Config
    out_root: Path | None = None         # results elsewhere than <cache>/objects (tests, benches)

    @property
    def name(self) -> str:
        base = f"{self.toolchain}-{self.config.key}"
        if self.tree.parent.resolve() == self.cache.resolve() and self.tree.name.startswith("linux-"):
            return base
        tree = self.tree.resolve()
        h = hashlib.sha256(str(tree).encode()).hexdigest()[:8]
        return f"{tree.name}-{h}-{base}"

    @property
    def worktree(self) -> Path:
        return self.cache / "worktrees" / self.name

    @property
    def build_dir(self) -> Path:
        return self.cache / "build" / self.name

    @property
    def lock(self) -> Path:
        return prepare_lock(self.build_dir)

    @property
    def worktree_lock(self) -> Path:
        """Beside the worktree's real path: a cache that links another's worktrees (the benches'
        private caches do) shares this lock with it, not only the build dir's."""
        real = self.worktree.resolve()
        return real.parent / f".{real.name}.lock"

    @property
    def objects(self) -> Path:
        return (self.out_root or self.cache / "objects") / self.toolchain / self.config.key

    def out_dir(self, sha: str) -> Path:
        return self.objects / sha

    @property
    def ccache_dir(self) -> Path:
        return self.cache / "ccache"


def atomic_copy(src: Path, dest: Path) -> Path:
    """Copy ``src`` to ``dest`` through a temporary name: a reader never sees half a file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    with open(src, "rb") as f, open(tmp, "wb") as g:
        while chunk := f.read(1 << 20):
            g.write(chunk)
    tmp.replace(dest)
    return dest


def atomic_write(dest: Path, text: str) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(dest)
    return dest

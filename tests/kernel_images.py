"""Linked kernel images for the oracle tests: the ``allocator`` vmlinux of linux-6.1 at each commit
of the example series (base, patch 1, patch 2), and out-of-tree ``.ko`` modules built against
that same build dir.

The vmlinux builds go through toolchains.build like a user's (kept under the sizewatch cache:
~3.5 min per toolchain with -j2 the first time, ~6 s more per patch, then taken from the cache);
the modules are built with kbuild's ``M=`` into a temp dir each run (a few seconds). The
``allocator`` config has ``CONFIG_MODULES=y``, so one build dir serves both, and the pipeline's
vmlinux tests (``sizewatch run --config allocator``) find the same images: one kind of vmlinux
per toolchain per machine serves every test.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toolchains.build import BuildOptions, build_commit, layout
from toolchains.example import series_commits
from toolchains.kbuild import make_cmd, preset
from toolchains.locks import file_lock
from toolchains.registry import load

TOOLCHAIN = "gcc-12"
CONFIG = preset("allocator")
MODULE_SRC = Path(__file__).resolve().parent / "fixtures" / "kmod"


@dataclass(frozen=True)
class Images:
    tree: Path
    shas: list[str]            # base, patch 1
    vmlinux: list[Path]        # one per sha, kept in the cache


def allocator_vmlinux(toolchain: str = TOOLCHAIN, commits: int = 3) -> Images:
    """vmlinux at the series' first ``commits`` commits (built once, then cached). One build at a
    time: build_commit holds the build dir's lock, and the commits build one after the other
    (kbuild's incremental make: each patch recompiles mm/page_alloc.c and relinks)."""
    tree, shas = series_commits()
    shas = shas[:commits]
    opts = BuildOptions(reports=False, jobs=2, timeout=2400)
    out = []
    for sha in shas:
        b = build_commit(tree, sha, toolchain, ["vmlinux"], CONFIG, opts)
        if b.status != "ok" or b.targets[0].path is None:
            raise RuntimeError(f"allocator vmlinux ({toolchain}) at {sha[:12]}: {b.status}: "
                               f"{b.errors or b.targets[0].errors}")
        out.append(b.targets[0].path)
    return Images(tree, shas, out)


def tiny_vmlinux() -> Images:
    """The base and patch 1 under gcc-12 (what the image tests compare)."""
    return allocator_vmlinux(TOOLCHAIN, 2)


def build_module(images: Images, version: int, dest: Path) -> Path:
    """tests/fixtures/kmod built with ``-DKMOD_VERSION=<version>`` against the tinyconfig build
    dir (kbuild ``M=``, the way out-of-tree modules are built); returns the ``.ko``."""
    lay = layout(images.tree, TOOLCHAIN, CONFIG, BuildOptions())
    tc = load(TOOLCHAIN)
    mdir = dest / f"kmod-v{version}"
    shutil.copytree(MODULE_SRC, mdir)
    with (mdir / "Kbuild").open("a") as f:
        f.write(f"ccflags-y += -DKMOD_VERSION={version}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "KBUILD"))}
    with file_lock(lay.worktree_lock), file_lock(lay.lock):
        # the worktree must hold the tree the build dir was made from (any commit of the series:
        # the module uses no mm/ code, and the headers do not change along it)
        for target in (["modules_prepare"], [f"M={mdir}", "modules"]):    # scripts/module.lds, then M=
            p = subprocess.run(make_cmd(lay.worktree, lay.build_dir, tc, CONFIG, *target, jobs=2),
                               capture_output=True, text=True, env=env, timeout=600)
            if p.returncode:
                raise RuntimeError(f"make {' '.join(target)}: {p.stderr[-2000:]}")
    ko = mdir / "sizewatch_kmod.ko"
    if not ko.exists():
        raise RuntimeError(f"{ko} not built")
    return ko

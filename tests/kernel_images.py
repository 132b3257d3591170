"""Linked kernel images for the oracle tests: the ``allocator`` vmlinux of linux-6.1 at each commit
of the example series (base, patch 1, patch 2), and out-of-tree ``.ko`` modules built against
that same build dir.

The vmlinux builds go through toolchains.build like a user's (kept under the sizewatch cache:
~3.5 min per toolchain with -j2 the first time, ~6 s more per patch, then taken from the cache);
the modules are built with kbuild's ``M=`` into a temp dir each run (a few seconds). The
``allocator`` config has ``CONFIG_MODULES=y``, so one build dir serves both, and the pipeline's
vmlinux tests (``sizewatch run --config allocator``) find the same images: one kind of vmlinux
per toolchain per machine serves every test.

That build dir and its worktree are shared: with the other kernel tests and with ``make run`` on
this machine (the same ``~/.cache/sizewatch``). A test that builds another commit there puts the
dir back (``put_back``: linked again at the commit it held); ``build_module`` makes sure the dir it
builds against is linked at a commit of the series, whatever ran before it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from toolchains import buildstate
from toolchains.build import BuildOptions, build_commit, layout
from toolchains.example import series_commits
from toolchains.git import git
from toolchains.kbuild import Config, make_cmd, preset
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


def allocator_vmlinux(toolchain: str = TOOLCHAIN, commits: int = 3, config: Config = CONFIG) -> Images:
    """vmlinux at the series' first ``commits`` commits (built once, then cached). One build at a
    time: build_commit holds the build dir's lock, and the commits build one after the other
    (kbuild's incremental make: each patch recompiles mm/page_alloc.c and relinks). ``config``:
    another arch's twin (``preset("allocator", arch="arm64")``: its own build dir)."""
    tree, shas = series_commits()
    shas = shas[:commits]
    opts = BuildOptions(reports=False, jobs=2, timeout=2400)
    out = []
    for sha in shas:
        b = build_commit(tree, sha, toolchain, ["vmlinux"], config, opts)
        if b.status != "ok" or b.targets[0].path is None:
            raise RuntimeError(f"allocator vmlinux ({toolchain}, {config.arch}) at {sha[:12]}: {b.status}: "
                               f"{b.errors or b.targets[0].errors}")
        out.append(b.targets[0].path)
    return Images(tree, shas, out)


def tiny_vmlinux() -> Images:
    """The base and patch 1 under gcc-12 (what the image tests compare)."""
    return allocator_vmlinux(TOOLCHAIN, 2)


def relink_at(tree: Path, sha: str, toolchain: str, dest: Path, config: Config = CONFIG) -> None:
    """The shared build dir of (tree, toolchain, config) made whole at ``sha``: its worktree there and
    vmlinux linked by make (which rebuilds only what differs), the last clean make stamped ``sha``.
    Nothing goes into the shared cache's results: they are kept under ``dest``."""
    b = build_commit(tree, sha, toolchain, ["vmlinux"], config,
                     BuildOptions(reports=False, jobs=2, timeout=2400, use_cache=False, out_root=dest))
    if b.status != "ok" or b.targets[0].status != "ok":
        raise RuntimeError(f"relinking the {toolchain} build dir at {sha[:12]}: {b.targets[0].errors or b.errors}")


@contextmanager
def put_back(tree: Path, toolchain: str, dest: Path, fallback: str, config: Config = CONFIG) -> Iterator[None]:
    """For a test that builds other commits in the shared build dir: afterwards (pass or fail) the
    dir is linked again at the commit of its last clean make before the test (``fallback`` when it
    had none), as ``make run`` and the next test expect to find it."""
    before = buildstate.synced(layout(tree, toolchain, config, BuildOptions()).build_dir) or fallback
    try:
        yield
    finally:
        relink_at(tree, before, toolchain, dest / f"put-back-{toolchain}", config)


def build_module(images: Images, version: int, dest: Path) -> Path:
    """tests/fixtures/kmod built with ``-DKMOD_VERSION=<version>`` against the ``allocator`` build
    dir (kbuild ``M=``, the way out-of-tree modules are built); returns the ``.ko``.

    The build dir must be linked at a commit of the series with its worktree at that commit (the
    module uses no mm/ code, and the headers do not change along it). Another test or ``make run``
    may have left it elsewhere (a commit that does not link, a build killed half-way): then it is
    relinked at the series' base first, and checked again under its locks."""
    lay = layout(images.tree, TOOLCHAIN, CONFIG, BuildOptions())
    tc = load(TOOLCHAIN)
    mdir = dest / f"kmod-v{version}"
    shutil.copytree(MODULE_SRC, mdir)
    with (mdir / "Kbuild").open("a") as f:
        f.write(f"ccflags-y += -DKMOD_VERSION={version}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "KBUILD"))}
    series = set(series_commits()[1])
    for attempt in range(3):
        with file_lock(lay.worktree_lock), file_lock(lay.lock):
            at = buildstate.synced(lay.build_dir)
            head = git(lay.worktree, "rev-parse", "HEAD").strip() if (lay.worktree / ".git").exists() else None
            if at in series and head == at and (lay.build_dir / "vmlinux").is_file():
                for target in (["modules_prepare"], [f"M={mdir}", "modules"]):    # scripts/module.lds, then M=
                    p = subprocess.run(make_cmd(lay.worktree, lay.build_dir, tc, CONFIG, *target, jobs=2),
                                       capture_output=True, text=True, env=env, timeout=600)
                    if p.returncode:
                        raise RuntimeError(f"make {' '.join(target)}: {p.stderr[-2000:]}")
                break
        relink_at(images.tree, images.shas[0], TOOLCHAIN, dest / f"relink-{attempt}")
    else:
        raise RuntimeError(f"{lay.build_dir}: moved away from the series by another process three times")
    ko = mdir / "sizewatch_kmod.ko"
    if not ko.exists():
        raise RuntimeError(f"{ko} not built")
    return ko

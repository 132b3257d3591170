"""What a build's commands see: the sandbox (bubblewrap binds and masks for this build dir),
PATH (with ccache's masquerade links first when asked for) and the environment."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.layout import Layout
from toolchains.registry import Toolchain
from toolchains.results import BuildOptions
from toolchains.sandbox import Sandbox, default_masks
from toolchains.sandbox import unavailable as sandbox_unavailable


def ccache_path(lay: Layout, tc: Toolchain) -> Path:
    """A directory of ``<compiler> -> ccache`` links put first on PATH: ccache's masquerade mode
    keeps kbuild's command lines (CC=gcc-12) unchanged, so turning it on or off rebuilds nothing."""
    bindir = lay.ccache_dir / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("ccache")
    if exe is None:
        raise BuildError("ccache is not installed (apt-get install ccache)")
    for name in {tc.compiler, *tc.make_vars.values()}:
        if not name or "/" in name or name.startswith("-") or shutil.which(name) is None:
            continue
        link = bindir / name
        if not link.is_symlink():
            tmp = bindir / f".{name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(exe)
            tmp.replace(link)
    return bindir


def sandbox_for(lay: Layout, tc: Toolchain, options: BuildOptions) -> Sandbox:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env: list[tuple[str, str]] = []
    writable = [lay.build_dir]
    readable = [lay.tree, lay.worktree]
    if options.ccache:
        bindir = ccache_path(lay, tc)
        path = f"{bindir}:{path}"
        store = lay.ccache_dir / "store"
        store.mkdir(parents=True, exist_ok=True)
        env += [("CCACHE_DIR", str(store))]
        writable.append(store)
        readable.append(bindir)
    if not options.sandbox:
        return Sandbox(False, path=path, env_extra=tuple(env))
    why = sandbox_unavailable()
    if why:
        raise BuildError(f"{why}; for trusted trees only: --no-sandbox or SIZEWATCH_SANDBOX=0")
    return Sandbox(True, tuple(writable), tuple(readable), tuple(default_masks(lay.cache)), path, tuple(env))

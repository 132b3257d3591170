"""What the measured guest runs: the benchmark module built against the measured build dir,
a tiny static init that loads it, and the initramfs holding both.

The vmlinux is never touched: the module is an out-of-tree kbuild ``M=`` build against the
build dir (the way any out-of-tree module is built), and the init and module reach the guest
in an initramfs, so the kernel that boots is byte for byte the one that was analysed.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.registry import Toolchain
from toolchains.runtime.qemu import MissingTool, host_built

GUEST_SRC = Path(__file__).resolve().parent / "guest"
MODULE = "sizewatch_pagebench.ko"


def _env() -> dict[str, str]:
    """The caller's environment without make's and kbuild's own variables (a pytest or make parent
    must not leak MAKEFLAGS or KBUILD_* into the module build)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "KBUILD", "MFLAGS"))}


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()] or lines or ["?"]
    return errs[-1][:240]


def build_module(build_dir: Path, tc: Toolchain, work: Path, timeout: float = 600, src: Path = GUEST_SRC) -> Path:
    """``sizewatch_pagebench.ko`` built against ``build_dir`` with ``tc`` (kbuild ``M=``).
    ``src``: another module directory building a .ko of that name (the tests' oracle module).
    ``modules_prepare`` runs first only when the build dir lacks the module linker script (a
    ``make vmlinux`` does not make it); neither step relinks vmlinux."""
    if not (build_dir / "Makefile").is_file() or not (build_dir / ".config").is_file():
        raise BuildError(f"{build_dir}: not a kernel build dir (no Makefile and .config)")
    config = (build_dir / ".config").read_text(errors="replace").splitlines()
    if "CONFIG_MODULES=y" not in config:
        raise BuildError(f"{build_dir}: built without CONFIG_MODULES: the benchmark module cannot load")
    mdir = work / "module"
    shutil.copytree(src, mdir, ignore=shutil.ignore_patterns("init.c"))
    base = ["make", "-s", "-C", str(build_dir), "-j2", *tc.make_args()]
    steps = [[*base, f"M={mdir}", "modules"]]
    if not (build_dir / "scripts" / "module.lds").is_file():
        steps.insert(0, [*base, "modules_prepare"])
    for argv in steps:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BuildError(f"building the benchmark module: {argv[-1]} took over {timeout:.0f} s") from None
        if p.returncode:
            raise BuildError(f"building the benchmark module ({argv[-1]}) failed: {_last_error(p.stderr + p.stdout)}")
    ko = mdir / MODULE
    if not ko.is_file():
        raise BuildError(f"building the benchmark module gave no {MODULE}")
    return ko


def init_binary() -> Path:
    """The guest's static init (``guest/init.c``), built once per source with the host's gcc."""
    src = GUEST_SRC / "init.c"
    return host_built("init", src.read_bytes(), ["-static", "-O2", str(src)],
                      "the guest's static init (libc6-dev has the static libc)", MissingTool)


def _cpio_entry(name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0), ino: int = 1) -> bytes:
    """One ``newc`` record, the format the kernel's initramfs unpacker reads."""
    nb = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(nb), 0]
    head = b"070701" + b"".join(b"%08X" % f for f in fields)
    out = head + nb
    out += b"\0" * (-len(out) % 4)
    out += data
    out += b"\0" * (-len(out) % 4)
    return out


def initramfs(dest: Path, module: Path, params: str) -> Path:
    """An uncompressed newc initramfs: /init, the module, its parameters, /dev/console."""
    entries = [
        _cpio_entry("dev", stat.S_IFDIR | 0o755, ino=1),
        _cpio_entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1), ino=2),
        _cpio_entry("init", stat.S_IFREG | 0o755, init_binary().read_bytes(), ino=3),
        _cpio_entry(MODULE, stat.S_IFREG | 0o644, module.read_bytes(), ino=4),
        _cpio_entry("params", stat.S_IFREG | 0o644, params.encode() + b"\n", ino=5),
        _cpio_entry("TRAILER!!!", 0, ino=0),
    ]
    blob = b"".join(entries)
    blob += b"\0" * (-len(blob) % 512)
    dest.write_bytes(blob)
    return dest

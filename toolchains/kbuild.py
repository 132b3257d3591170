"""Driving kbuild: configure and prepare an out-of-tree build dir once, then build single objects.

``defconfig`` + ``prepare`` cost 25-36 s per toolchain, so a prepared build dir
is kept (keyed by toolchain and config fragment) and reused; a stamp file
records what it was prepared from so a changed fragment starts afresh.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.locks import file_lock
from toolchains.registry import Toolchain

# The default config: x86_64 defconfig with DWARF5 debug info (what the analyzer reads).
DEFAULT_FRAGMENT = ("CONFIG_DEBUG_INFO_DWARF5=y", "# CONFIG_DEBUG_INFO_NONE is not set")
STAMP = ".sizewatch-prepared"


@dataclass(frozen=True)
class Config:
    """A kernel config: a base target (defconfig, tinyconfig) plus fragment lines."""
    base: str = "defconfig"
    fragment: tuple[str, ...] = DEFAULT_FRAGMENT
    arch: str = "x86_64"

    @property
    def key(self) -> str:
        h = hashlib.sha256("\n".join((self.arch, self.base, *self.fragment)).encode()).hexdigest()
        return f"{self.base}-{h[:10]}"


@dataclass(frozen=True)
class BuildResult:
    target: str
    object_path: Path
    seconds: float
    log: str


def make_cmd(src: Path, build_dir: Path, tc: Toolchain, config: Config, *targets: str,
             jobs: int | None = None) -> list[str]:
    return ["make", "-s", "-C", str(src), f"O={build_dir}", f"ARCH={config.arch}",
            f"-j{jobs or os.cpu_count() or 1}", *tc.make_args(), *targets]


def run(cmd: list[str], cwd: Path | None = None, timeout: float | None = None) -> str:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace",
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{' '.join(cmd[:2])} … timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        errs = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()] or proc.stderr.splitlines()
        last = errs[-1] if errs else f"exit {proc.returncode}"
        raise BuildError(f"{cmd[0]} {cmd[-1]} failed: {last.strip()}")
    return proc.stdout + proc.stderr


def _stamp_text(src: Path, tc: Toolchain, config: Config) -> str:
    return "\n".join([str(src.resolve()), tc.name, tc.version(), config.arch, config.base,
                      *config.fragment]) + "\n"


def prepare(src: Path, build_dir: Path, tc: Toolchain, config: Config = Config()) -> Path:
    """Configure and ``make prepare`` in build_dir unless it is already prepared for the same inputs."""
    stamp = build_dir / STAMP
    want = _stamp_text(src, tc, config)
    if stamp.exists() and stamp.read_text() == want:
        return build_dir
    with file_lock(build_dir.parent / f".{build_dir.name}.lock"):
        if not (stamp.exists() and stamp.read_text() == want):
            _prepare(src, build_dir, tc, config, stamp, want)
    return build_dir


def _prepare(src: Path, build_dir: Path, tc: Toolchain, config: Config, stamp: Path,
             want: str) -> None:
    if build_dir.exists():
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    run(make_cmd(src, build_dir, tc, config, config.base))
    cfg = build_dir / ".config"
    with cfg.open("a") as f:
        f.write("\n".join(config.fragment) + "\n")
    run(make_cmd(src, build_dir, tc, config, "olddefconfig"))
    _check_fragment(cfg, config)
    run(make_cmd(src, build_dir, tc, config, "prepare"))
    stamp.write_text(want)


def _check_fragment(cfg: Path, config: Config) -> None:
    """Fail when olddefconfig dropped a requested option (a typo or an unmet dependency)."""
    have = set(cfg.read_text().splitlines())
    for line in config.fragment:
        if line.startswith("CONFIG_") and line not in have:
            raise BuildError(f"config option {line} did not survive olddefconfig")


def build_object(src: Path, build_dir: Path, tc: Toolchain, target: str,
                 config: Config = Config(), timeout: float | None = 900) -> BuildResult:
    """Build one object (e.g. ``mm/page_alloc.o``) in a prepared build dir."""
    prepare(src, build_dir, tc, config)
    t0 = time.monotonic()
    log = run(make_cmd(src, build_dir, tc, config, target), timeout=timeout)
    obj = build_dir / target
    if not obj.exists():
        raise BuildError(f"make {target} produced no {obj}")
    return BuildResult(target, obj, time.monotonic() - t0, log)

"""Driving kbuild: configure and prepare an out-of-tree build dir once, then build in it.

``defconfig`` + ``prepare`` cost 25-36 s per toolchain, so a prepared build dir
is kept (keyed by toolchain and config fragment) and reused; a stamp file
records what it was prepared from so a changed fragment starts afresh.
Every make runs through a ``Runner`` (toolchains.build passes one that sandboxes
and limits it: prepare runs the commit's Makefiles and scripts too).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from toolchains import inline_report, presets, process
from toolchains.errors import BuildError
from toolchains.locks import file_lock
from toolchains.process import Limits, Outcome
from toolchains.registry import ARCHES, Toolchain
from toolchains.sandbox import Sandbox

# The default config: x86_64 defconfig with DWARF5 debug info (what the analyzer reads).
# The named configs are data: toolchains/configs/<name>.config (toolchains.presets).
DEFAULT_FRAGMENT = presets.load("defconfig")[1]
# tinyconfig made 64-bit with DWARF5 debug info (the debug-info choice needs DEBUG_KERNEL there).
TINY_FRAGMENT = presets.load("tinyconfig")[1]
STAMP = ".sizewatch-prepared"
LTO_THIN = "CONFIG_LTO_CLANG_THIN=y"


@dataclass(frozen=True)
class Config:
    """A kernel config: a base target (defconfig, tinyconfig) plus fragment lines."""
    base: str = "defconfig"
    fragment: tuple[str, ...] = DEFAULT_FRAGMENT
    arch: str = "x86_64"
    name: str = ""             # the named config it is (allocator...); the key starts with it

    @property
    def lto(self) -> str:
        """``thin`` when the config builds a clang ThinLTO kernel (its per-unit ``.o`` files are LLVM
        bitcode: only a linked vmlinux is machine code), else ``""``."""
        return "thin" if LTO_THIN in self.fragment else ""

    @property
    def key(self) -> str:
        """What build dirs and stored builds are keyed by: the config's name (with the arch when it
        is not x86_64, whose keys predate arches; with ``thinlto`` under ThinLTO) and a hash of
        everything that makes it: ``allocator-6df82ece8a``, ``allocator-arm64-thinlto-...``."""
        h = hashlib.sha256("\n".join((self.arch, self.base, *self.fragment)).encode()).hexdigest()
        arch = "" if self.arch == "x86_64" else f"{self.arch}-"
        lto = f"{self.lto}lto-" if self.lto else ""
        return f"{self.name or self.base}-{arch}{lto}{h[:10]}"


def _named(name: str, arch: str = "x86_64") -> Config:
    base, fragment = presets.load(name, presets.arch_dir(arch))
    if arch == "x86_64":
        return Config(base, fragment, name="" if name == base else name)   # defconfig is Config()
    return Config(base, fragment, arch, name)


PRESETS = {name: _named(name) for name in presets.names()}
# the other arches' twins of the named configs, by (name, arch)
ARCH_PRESETS = {(name, arch): _named(name, arch) for arch in ARCHES if arch != "x86_64"
                for name in presets.names(presets.arch_dir(arch))}


def preset(name: str, extra: tuple[str, ...] = (), arch: str = "x86_64", lto: str = "") -> Config:
    """A named config (defconfig, tinyconfig, allocator) for ``arch``, with extra fragment lines
    appended; ``lto="thin"``: with ``configs/lto/thin.fragment`` (clang ThinLTO) after them."""
    if arch not in ARCHES:
        raise BuildError(f"unknown arch {arch!r} (known: {', '.join(ARCHES)})")
    if arch == "x86_64":
        if name not in PRESETS:
            raise BuildError(f"unknown config {name!r} (known: {', '.join(PRESETS)})")
        base = PRESETS[name]
    else:
        base = ARCH_PRESETS.get((name, arch))
        if base is None:
            known = ", ".join(n for n, a in ARCH_PRESETS if a == arch)
            raise BuildError(f"unknown config {name!r} for {arch} (known: {known})")
    if lto:
        extra = tuple(extra) + tuple(ln for ln in presets.lto_fragment(lto) if ln not in extra)
    return Config(base.base, base.fragment + tuple(extra), base.arch, base.name) if extra else base


def preset_of(key: str) -> tuple[str, str, str] | None:
    """(name, arch, lto) of the named config a stored config key was made from
    (``allocator-arm64-thinlto-...`` -> allocator, arm64, thin); None for a config with extra lines."""
    every = [*PRESETS.items(), *((n, c) for (n, _), c in ARCH_PRESETS.items())]
    for lto in ("", *presets.LTO_MODES):
        for n, c in every:
            if (preset(n, arch=c.arch, lto=lto) if lto else c).key == key:
                return n, c.arch, lto
    return None


def preset_name(key: str) -> str | None:
    """The named config a stored config key was made from (``allocator-6df82ece8a`` -> allocator,
    ``allocator-thinlto-...`` -> allocator too); None for a config with extra lines (its key is no
    preset's)."""
    got = preset_of(key)
    return got[0] if got else None


def read_fragment(path: Path) -> tuple[str, ...]:
    """Config lines of a fragment file (``CONFIG_X=y`` / ``# CONFIG_X is not set``)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise BuildError(f"{path}: {e.strerror}") from None
    return presets.fragment_lines(text, str(path))


def make_cmd(src: Path, build_dir: Path, tc: Toolchain, config: Config, *targets: str,
             jobs: int | None = None) -> list[str]:
    lto = inline_report.lto_make_args(tc.make_vars, build_dir) if config.lto and tc.family == "clang" else []
    return ["make", "-s", "-C", str(src), f"O={build_dir}", f"ARCH={config.arch}",
            f"-j{jobs or os.cpu_count() or 1}", *tc.make_args(), *lto, *targets]


# Runs one command (argv, cwd) the way the caller wants it run: sandboxed, time- and memory-limited.
Runner = Callable[[list[str], Path], Outcome]


def plain_runner(argv: list[str], cwd: Path) -> Outcome:
    """No sandbox, no limits: for trusted trees."""
    return process.run(argv, cwd, Sandbox(False), Limits(None, None))


def _run(runner: Runner, cmd: list[str], cwd: Path) -> str:
    out = runner(cmd, cwd)
    if out.status != "ok":
        errs = [ln for ln in out.stderr.splitlines() if "error" in ln.lower()] or out.stderr.splitlines()
        last = errs[-1].strip() if errs else f"exit {out.returncode}"
        raise BuildError(f"make {cmd[-1]} {out.status}: {last}")
    return out.output


def _stamp_text(src: Path, tc: Toolchain, config: Config) -> str:
    return "\n".join([str(src.resolve()), tc.name, tc.version(), config.arch, config.base,
                      *config.fragment]) + "\n"


def is_prepared(src: Path, build_dir: Path, tc: Toolchain, config: Config = Config()) -> bool:
    stamp = build_dir / STAMP
    return stamp.exists() and stamp.read_text() == _stamp_text(src, tc, config)


def prepare_lock(build_dir: Path) -> Path:
    """The lock every user of a build dir (and its worktree) holds: prepare, builds, replays."""
    return build_dir.parent / f".{build_dir.name}.lock"


def prepare(src: Path, build_dir: Path, tc: Toolchain, config: Config = Config(),
            runner: Runner = plain_runner, locked: bool = False) -> Path:
    """Configure and ``make prepare`` in build_dir unless it is already prepared for the same inputs.

    ``locked``: the caller already holds ``prepare_lock(build_dir)``.
    """
    if is_prepared(src, build_dir, tc, config):
        return build_dir
    if locked:
        _prepare(src, build_dir, tc, config, runner)
        return build_dir
    with file_lock(prepare_lock(build_dir)):
        if not is_prepared(src, build_dir, tc, config):
            _prepare(src, build_dir, tc, config, runner)
    return build_dir


def _prepare(src: Path, build_dir: Path, tc: Toolchain, config: Config, runner: Runner) -> None:
    if build_dir.exists():
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    _run(runner, make_cmd(src, build_dir, tc, config, config.base), build_dir)
    cfg = build_dir / ".config"
    with cfg.open("a") as f:
        f.write("\n".join(config.fragment) + "\n")
    _run(runner, make_cmd(src, build_dir, tc, config, "olddefconfig"), build_dir)
    _check_fragment(cfg, config)
    _run(runner, make_cmd(src, build_dir, tc, config, "prepare"), build_dir)
    (build_dir / STAMP).write_text(_stamp_text(src, tc, config))


def _check_fragment(cfg: Path, config: Config) -> None:
    """Fail when olddefconfig dropped a requested option (a typo or an unmet dependency), or
    turned on one the fragment turns off: the build would not be of the config asked for."""
    lines = cfg.read_text().splitlines()
    have = set(lines)
    label = config.name or config.base
    for line in config.fragment:
        if line.startswith("CONFIG_") and line not in have:
            name = line.split("=", 1)[0]
            now = next((ln for ln in lines if ln.startswith(name + "=") or ln == f"# {name} is not set"), None)
            raise BuildError(f"config {label}: {line} did not survive olddefconfig "
                             f"({now or 'absent: no such option, or its dependencies are off'})")
        if line.startswith("# CONFIG_"):
            name = line[2:].split(" ", 1)[0]
            on = next((ln for ln in lines if ln.startswith(name + "=")), None)
            if on is not None:
                raise BuildError(f"config {label}: {name} is on after olddefconfig ({on}) although "
                                 f"the config turns it off")

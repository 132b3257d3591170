"""The named kernel configs, as data: ``toolchains/configs/<name>.config`` beside the registry.

Each file is a config fragment (``CONFIG_X=y`` / ``# CONFIG_X is not set``) whose first line
names the kbuild target it starts from (``# base: tinyconfig``); the rest of its comments say
why each option is there. ``toolchains.kbuild`` appends the fragment to the base's ``.config``,
runs ``olddefconfig`` and refuses a config in which a requested option did not survive.
Keeping them as files lets a user read, diff and copy exactly what a build used.
"""
from __future__ import annotations

import re
from pathlib import Path

from toolchains.errors import BuildError

CONFIGS = Path(__file__).resolve().parent / "configs"
_BASE = re.compile(r"^#\s*base:\s*([A-Za-z0-9_]+config)\s*$")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")                     # whole name (fullmatch)


def arch_dir(arch: str = "x86_64", root: Path = CONFIGS) -> Path:
    """Where an arch's named configs live: x86_64's in ``configs/``, another arch's in
    ``configs/<arch>/`` (its twins: the same names, from that arch's base targets)."""
    return root if arch == "x86_64" else root / arch


def names(root: Path = CONFIGS) -> list[str]:
    """The configs shipped, by name (defconfig, tinyconfig, allocator...)."""
    return sorted(p.stem for p in root.glob("*.config"))


def fragment_lines(text: str, where: str) -> tuple[str, ...]:
    """The config lines of a fragment, in order; anything else but comments is an error."""
    out = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln.startswith("CONFIG_") or (ln.startswith("# CONFIG_") and ln.endswith(" is not set")):
            out.append(ln)
        elif ln and not ln.startswith("#"):
            raise BuildError(f"{where}: not a config fragment line: {ln[:60]!r}")
    return tuple(out)


LTO_MODES = ("thin",)                                          # --lto: configs/lto/<mode>.fragment


def lto_fragment(mode: str, root: Path = CONFIGS) -> tuple[str, ...]:
    """The lines ``--lto MODE`` appends to a named config (``configs/lto/thin.fragment``: ThinLTO,
    with the reason for each line); an unknown mode is a one-line error."""
    if mode not in LTO_MODES:
        raise BuildError(f"unknown --lto {mode!r} (known: {', '.join(LTO_MODES)})")
    path = root / "lto" / f"{mode}.fragment"
    return fragment_lines(path.read_text(), str(path))


def load(name: str, root: Path = CONFIGS) -> tuple[str, tuple[str, ...]]:
    """(base target, fragment lines) of the named config; an unknown name is a one-line error."""
    path = root / f"{name}.config"
    if not _NAME.fullmatch(name) or not path.is_file():
        raise BuildError(f"unknown config {name!r} (known: {', '.join(names(root))})")
    text = path.read_text()
    first = text.splitlines()[0] if text else ""
    m = _BASE.match(first)
    if not m:
        raise BuildError(f"{path}: the first line must name the base config (# base: tinyconfig)")
    return m.group(1), fragment_lines(text, str(path))

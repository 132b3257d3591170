"""bloat-o-meter's comparison, as plain data.

Mirrors scripts/bloat-o-meter of Linux 6.12 (and 6.1 with ``weak=False``):
symbol selection by nm type letter, the generated-name filters, ``.NUMBER``
stripping with sizes summed, and the (delta, name) descending sort.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.clones import strip_number
from analyzer.elf import load_images
from analyzer.errors import InputError
from analyzer.nm import NmSymbol, size_sort

# Type letters per mode: (title, letters) as in bloat-o-meter 6.12 and 6.1.
MODES_612 = {
    "default": [("Function", "tTdDbBrRvVwW")],
    "c": [("Function", "tTwW"), ("Data", "dDbBvV"), ("RO Data", "rR")],
    "d": [("Data", "dDbBrRvV")],
    "t": [("Function", "tTwW")],
}
MODES_61 = {
    "default": [("Function", "tTdDbBrR")],
    "c": [("Function", "tT"), ("Data", "dDbB"), ("RO Data", "rR")],
    "d": [("Data", "dDbBrR")],
    "t": [("Function", "tT")],
}
_GENERATED_PREFIXES = ("__mod_", "__se_sys", "__se_compat_sys", "__addressable_")
_GENERATED_NAMES = ("linux_banner", "vermagic")
_COMPILER_PREFIXES = ("__pfx_", "__cfi_")


@dataclass
class SymbolSet:
    """Every nm-listed symbol of a file (all archive members together)."""
    path: str
    symbols: list[NmSymbol]


@dataclass(frozen=True)
class Row:
    name: str
    old: int | None
    new: int | None
    delta: int


@dataclass
class Comparison:
    """One bloat-o-meter table."""
    title: str
    add: int
    remove: int
    grow: int
    shrink: int
    up: int
    down: int
    rows: list[Row] = field(default_factory=list)   # only the non-zero deltas, in bloat-o-meter order
    old_total: int = 0
    new_total: int = 0
    old_sizes: dict[str, int] = field(default_factory=dict, repr=False)  # every selected symbol
    new_sizes: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def net(self) -> int:
        return self.up - self.down

    @property
    def percent(self) -> float:
        return (self.new_total - self.old_total) * 100.0 / self.old_total if self.old_total else 0


def read_symbols(path: str | os.PathLike) -> SymbolSet:
    """nm --size-sort of a file, archive members concatenated."""
    images = load_images(path)
    syms: list[NmSymbol] = []
    found_table = False
    for img in images:
        listed = size_sort(img)
        if listed or any(s.type == 2 for s in img.sections):
            found_table = True
        syms.extend(listed)
    if not found_table:
        raise InputError(f"{path}: no symbols (stripped file?)")
    return SymbolSet(str(Path(path)), syms)


def sizes(symset: SymbolSet, letters: str, skip_compiler: bool = False) -> dict[str, int]:
    """bloat-o-meter's getsizes(): selected, filtered, .NUMBER-stripped, summed."""
    out: dict[str, int] = {}
    get = out.get
    for s in symset.symbols:
        if s.letter not in letters:
            continue
        name = s.name
        if ":" in name or name.startswith(_GENERATED_PREFIXES) or name in _GENERATED_NAMES:
            continue
        if skip_compiler and name.startswith(_COMPILER_PREFIXES):
            continue
        name = strip_number(name)
        out[name] = get(name, 0) + s.size
    return out


def compare(old: dict[str, int], new: dict[str, int], title: str) -> Comparison:
    """bloat-o-meter's calc()."""
    grow = shrink = add = remove = up = down = 0
    delta: list[tuple[int, str]] = []
    for name, size in old.items():
        if name not in new:
            remove += 1
            down += size
            delta.append((-size, name))
    for name, size in new.items():
        if name not in old:
            add += 1
            up += size
            delta.append((size, name))
    for name, osize in old.items():
        nsize = new.get(name)
        if nsize is None:
            continue
        d = nsize - osize
        if d > 0:
            grow += 1
            up += d
        elif d < 0:
            shrink += 1
            down -= d
        delta.append((d, name))
    delta.sort(reverse=True)
    rows = [Row(n, old.get(n), new.get(n), d) for d, n in delta if d]
    return Comparison(title, add, remove, grow, shrink, up, down, rows,
                      sum(old.values()), sum(new.values()), old, new)


def diff(old: SymbolSet, new: SymbolSet, mode: str = "default", weak: bool = True,
         skip_compiler: bool = False) -> list[Comparison]:
    """All tables of one bloat-o-meter invocation (three for -c)."""
    modes = MODES_612 if weak else MODES_61
    return [compare(sizes(old, letters, skip_compiler), sizes(new, letters, skip_compiler), title)
            for title, letters in modes[mode]]


@dataclass
class TextSplit:
    """Code bytes in hot text versus cold text (``.text.unlikely``, ``*.cold`` parts)."""
    hot: int = 0
    cold: int = 0


def is_cold(sym: NmSymbol) -> bool:
    return sym.section.startswith((".text.unlikely", ".text.cold")) or ".cold" in sym.name


def text_split(symset: SymbolSet, skip_compiler: bool = False) -> TextSplit:
    out = TextSplit()
    for s in symset.symbols:
        if s.letter not in "tTwW" or not (s.letter in "tT" or s.section.startswith(".text")):
            continue
        if skip_compiler and s.name.startswith(_COMPILER_PREFIXES):
            continue
        if is_cold(s):
            out.cold += s.size
        else:
            out.hot += s.size
    return out

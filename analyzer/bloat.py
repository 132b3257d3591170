"""bloat-o-meter's comparison, as plain data.

Mirrors scripts/bloat-o-meter of Linux 6.12 (and 6.1 with ``weak=False``):
symbol selection by nm type letter, the generated-name filters, ``.NUMBER``
stripping with sizes summed, and the (delta, name) descending sort.
"""
from __future__ import annotations

import marshal
import os
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.clones import strip_number
from analyzer.elf import load_images
from analyzer.errors import InputError
from analyzer.nm import Listing, NmSymbol, listing

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
    """Every nm-listed symbol of a file (all archive members together), as columns."""
    path: str
    listings: list[Listing]
    _keys: dict = field(default_factory=dict, repr=False)

    @property
    def symbols(self) -> list[NmSymbol]:
        return [sym for lst in self.listings for sym in lst.symbols()]

    def keys(self, skip_compiler: bool) -> list[tuple[list[str | None], list[int], str]]:
        """Per listing: bloat-o-meter's name for each symbol (None when filtered), sizes, letters.

        Computed once per file and filter setting, shared by the tables of ``-c``.
        """
        if skip_compiler not in self._keys:
            self._keys[skip_compiler] = [(_bloat_names(lst.names, skip_compiler), lst.sizes, lst.letters)
                                         for lst in self.listings]
        return self._keys[skip_compiler]


def _bloat_names(names: list[str], skip_compiler: bool) -> list[str | None]:
    drop = _GENERATED_PREFIXES + (_COMPILER_PREFIXES if skip_compiler else ())
    gen = _GENERATED_NAMES
    return [None if (":" in n or n.startswith(drop) or n in gen) else (strip_number(n) if "." in n else n)
            for n in names]


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
    found = [got for got in map(listing, images) if got is not None]
    if not found:
        raise InputError(f"{path}: no symbols (stripped file?)")
    return SymbolSet(str(Path(path)), found)


def sizes(symset: SymbolSet, letters: str, skip_compiler: bool = False) -> dict[str, int]:
    """bloat-o-meter's getsizes(): selected, filtered, .NUMBER-stripped, summed."""
    wanted = frozenset(letters)
    out: dict[str, int] = {}
    get = out.get
    for names, sizes_, codes in symset.keys(skip_compiler):
        if wanted.issuperset(codes):        # every letter taken: skip the per-symbol test
            for name, size in zip(names, sizes_):
                if name is not None:
                    out[name] = get(name, 0) + size
            continue
        for name, size, code in zip(names, sizes_, codes):
            if name is not None and code in wanted:
                out[name] = get(name, 0) + size
    return out


def compare(old: dict[str, int], new: dict[str, int], title: str) -> Comparison:
    """bloat-o-meter's calc()."""
    removed = [n for n in old if n not in new]
    added = [n for n in new if n not in old]
    changed = [n for n, z in new.items() if old.get(n, z) != z]   # in both, size differs
    delta: list[tuple[int, str]] = [(-old[n], n) for n in removed]
    delta += [(new[n], n) for n in added]
    up = sum(new[n] for n in added)
    down = sum(old[n] for n in removed)
    grow = shrink = 0
    for name in changed:
        d = new[name] - old[name]
        if d > 0:
            grow += 1
            up += d
        else:
            shrink += 1
            down -= d
        delta.append((d, name))
    # bloat-o-meter sorts every (delta, name) and prints the non-zero ones: same order
    delta.sort(reverse=True)
    rows = [Row(n, old.get(n), new.get(n), d) for d, n in delta if d]
    return Comparison(title, len(added), len(removed), grow, shrink, up, down, rows,
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


def diff_files(old_path: str | os.PathLike, new_path: str | os.PathLike, mode: str = "default",
               weak: bool = True, skip_compiler: bool = False) -> list[Comparison]:
    """``diff(read_symbols(old), read_symbols(new))``, reading the two files on two cores.

    A vmlinux holds ~150k symbols and reading one costs as much as everything
    else together, so for large inputs the second file is read in a forked child
    that sends back only its per-mode size dicts (marshal: fast for str -> int).
    """
    modes = (MODES_612 if weak else MODES_61)[mode]
    big = os.path.getsize(old_path) + os.path.getsize(new_path) if _both_files(old_path, new_path) else 0
    if big < PARALLEL_BYTES or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        return diff(read_symbols(old_path), read_symbols(new_path), mode, weak, skip_compiler)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # child: the new file's sizes
        os.close(rfd)
        try:
            symset = read_symbols(new_path)
            payload = ("ok", [sizes(symset, letters, skip_compiler) for _, letters in modes])
        except InputError as e:
            payload = ("error", str(e))
        except BaseException as e:                 # never let the child run the parent's code
            payload = ("error", f"{new_path}: {e}")
        with os.fdopen(wfd, "wb") as w:
            w.write(marshal.dumps(payload))
        os._exit(0)
    os.close(wfd)
    try:
        old_err = None
        try:
            old = read_symbols(old_path)
            old_sizes = [sizes(old, letters, skip_compiler) for _, letters in modes]
        except InputError as e:
            old_err = e
        with os.fdopen(rfd, "rb") as r:
            data = r.read()
    finally:
        os.waitpid(pid, 0)
    if old_err is not None:
        raise old_err
    if not data:
        raise InputError(f"{new_path}: reading it failed")
    status, value = marshal.loads(data)
    if status != "ok":
        raise InputError(value)
    return [compare(o, n, title) for (title, _), o, n in zip(modes, old_sizes, value)]


PARALLEL_BYTES = 64 << 20


def _both_files(*paths: str | os.PathLike) -> bool:
    return all(os.path.isfile(p) for p in paths)

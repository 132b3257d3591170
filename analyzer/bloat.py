"""bloat-o-meter's comparison, as plain data.

Mirrors scripts/bloat-o-meter of Linux 6.12 (and 6.1 with ``weak=False``):
symbol selection by nm type letter, the generated-name filters, ``.NUMBER``
stripping with sizes summed, and the (delta, name) descending sort.
"""
from __future__ import annotations

import functools
import itertools
import marshal
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.clones import strip_number
from analyzer.elf import load_images
from analyzer.errors import InputError
from analyzer.nm import Listing, NmSymbol, columns, listing

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
    """bloat-o-meter's name for each symbol: None for those it filters out, the
    others with every ``.NUMBER`` stripped.

    Done on all names joined by NULs (which no name holds) with C-speed scans:
    the filters are rare hits of a few literal patterns, the stripping is one
    substitution. Per-name string methods took 1.6x as long on a vmlinux.
    """
    if not names:
        return []
    joined = "\0".join(itertools.chain(("",), names))     # a NUL before every name, the first too
    # where the NUL before each filtered name is
    nuls = [m.start() for m in _filtered_pattern(skip_compiler).finditer(joined)]
    colon = joined.find(":")
    while colon >= 0:                               # bloat-o-meter skips every nm line with a ':'
        nuls.append(joined.rfind("\0", 0, colon))
        colon = joined.find(":", colon + 1)
    out: list[str | None] = strip_number(joined).split("\0")
    del out[0]
    index = prev = 0
    for nul in sorted(nuls):                        # the NUL before name i is the i-th (from 0)
        index += joined.count("\0", prev, nul)
        prev = nul
        out[index] = None
    return out


@functools.cache
def _filtered_pattern(skip_compiler: bool) -> re.Pattern[str]:
    """A NUL, then a name bloat-o-meter filters out (generated prefixes, whole generated names)."""
    prefixes = _GENERATED_PREFIXES + (_COMPILER_PREFIXES if skip_compiler else ())
    return re.compile("\0(?:%s|(?:%s)(?=\0|\\Z))" % ("|".join(map(re.escape, prefixes)),
                                                  "|".join(map(re.escape, _GENERATED_NAMES))))


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


def file_sizes(path: str | os.PathLike, tables: list[str], skip_compiler: bool = False) -> list[dict[str, int]]:
    """``[sizes(read_symbols(path), letters) for letters in tables]`` in one pass per image.

    The diff path of a vmlinux: no Listing columns are built, a symbol no table
    takes never has its name decoded, and each one is summed straight into its
    table's dict (no test for filtered names in that loop: they go under None,
    dropped at the end). The letter sets of one invocation are disjoint (see MODES_*).
    """
    out: list[dict[str, int]] = [{} for _ in tables]
    table_of = {letter: table for letters, table in zip(tables, out) for letter in letters}
    found = False
    for img in load_images(path):
        got = columns(img, lambda letter, _shndx: table_of.get(letter))
        if got is None:
            continue
        found = True
        names, sizes_, dests = got
        for name, size, dest in zip(_bloat_names(names, skip_compiler), sizes_, dests):
            if name in dest:            # the filtered names are summed as well, under None
                dest[name] += size
            else:
                dest[name] = size
    if not found:
        raise InputError(f"{path}: no symbols (stripped file?)")
    for table in out:
        table.pop(None, None)
    return out


def compare(old: dict[str, int], new: dict[str, int], title: str) -> Comparison:
    """bloat-o-meter's calc()."""
    return _compare(old, dict(old), new, title)


def _compare(old: dict[str, int], rest: dict[str, int], new: dict[str, int], title: str) -> Comparison:
    """:func:`compare` given ``rest``, a copy of ``old`` that it empties.

    One pass over ``new`` in insertion order, popping each name from ``rest``:
    what it finds is common, what it misses added, what is left in it removed.
    One lookup per name instead of three (a vmlinux has ~70k), in nearly
    sequential memory order since both dicts follow the symbol tables (iterating
    sets of the names, in hash order, measured slower than the three passes).
    The rows' order comes from the (delta, name) sort alone.
    """
    pop = rest.pop
    delta: list[tuple[int, str]] = []
    add = grow = shrink = up = down = 0
    for name, size in new.items():
        was = pop(name, None)
        if was is None:
            add += 1
            up += size
            delta.append((size, name))
        elif was != size:
            d = size - was
            if d > 0:
                grow += 1
                up += d
            else:
                shrink += 1
                down -= d
            delta.append((d, name))
    down += sum(rest.values())
    delta += [(-size, name) for name, size in rest.items()]
    # bloat-o-meter sorts every (delta, name) and prints the non-zero ones: same order
    delta.sort(reverse=True)
    rows = [Row(n, old.get(n), new.get(n), d) for d, n in delta if d]
    return Comparison(title, add, len(rest), grow, shrink, up, down, rows,
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

    A vmlinux holds ~120k symbols and reading one costs as much as everything
    else together, so for large inputs the second file is read in a forked child
    that sends back only its per-mode size dicts (marshal: fast for str -> int).
    """
    modes = (MODES_612 if weak else MODES_61)[mode]
    tables = [letters for _, letters in modes]
    big = os.path.getsize(old_path) + os.path.getsize(new_path) if _both_files(old_path, new_path) else 0
    if big < PARALLEL_BYTES or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        old_sizes = file_sizes(old_path, tables, skip_compiler)
        new_sizes = file_sizes(new_path, tables, skip_compiler)
        return [compare(o, n, title) for (title, _), o, n in zip(modes, old_sizes, new_sizes)]
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # child: the new file's sizes
        os.close(rfd)
        try:
            payload = ("ok", file_sizes(new_path, tables, skip_compiler))
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
            old_sizes = file_sizes(old_path, tables, skip_compiler)
            rests = [dict(o) for o in old_sizes]    # made while the child still sends (~5 ms on a vmlinux)
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
    return [_compare(o, r, n, title) for (title, _), o, r, n in zip(modes, old_sizes, rests, value)]


PARALLEL_BYTES = 64 << 20


def _both_files(*paths: str | os.PathLike) -> bool:
    return all(os.path.isfile(p) for p in paths)

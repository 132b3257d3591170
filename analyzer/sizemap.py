"""Size as a map: an object's text bytes by directory → file → function, and a patch's change the same way.

"Where in the tree did it grow?" is answered as Chromium's SuperSize answers it: each function symbol
(``t``/``T``/``w``/``W``, in any executable section) is placed under the source file DWARF declares it
in (``DW_AT_decl_file``, the inline facts' ``decl``); a clone (``foo.part.0``, ``foo.cold``) goes where
``foo`` is declared, and a symbol DWARF says nothing about goes under the unit's own file. The bytes of
``size``'s text that no function symbol covers (alignment padding inside code sections, read-only data,
strings, kernel tables) are leaves of their own, so the map's leaves add up to ``size``'s text exactly.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable

from analyzer.clones import parse

FUNCTION_LETTERS = frozenset("tTwW")
NOT_FUNCTIONS = "(not in a function)"


@dataclass
class MapNode:
    """One rectangle: a directory, a file, a function, or bytes outside functions."""
    name: str
    kind: str                              # root | dir | file | function | other
    value: int = 0                         # bytes (build map) or |delta| (diff map): the area
    size: int = 0                          # build map: bytes; diff map: the new size
    old: int | None = None                 # diff map: the old size (None: not there before)
    delta: int = 0                         # diff map: new - old (signed); build map: 0
    path: str = ""                         # the tree path of a file or directory; a function's file
    children: list["MapNode"] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "value": self.value, "size": self.size, "delta": self.delta,
             "path": self.path}
        if self.old is not None or self.kind == "function":
            d["old"] = self.old
        if self.children:
            d["children"] = [c.to_dict() for c in self.children]
        return d

    def leaves(self) -> Iterable["MapNode"]:
        if not self.children:
            yield self
        for c in self.children:
            yield from c.leaves()


@dataclass(frozen=True)
class Sym:
    name: str
    size: int
    letter: str
    section: str | None
    offset: int | None = None


def unit_file(target: str) -> str:
    """kbuild compiles ``dir/x.o`` from ``dir/x.c``: the unit a symbol without a declaration belongs to."""
    root, ext = os.path.splitext(target)
    return root + ".c" if ext == ".o" else target


def tree_relative(decls: dict[str, str], unit: str) -> dict[str, str]:
    """Declaration files (``/abs/worktree/include/linux/mm.h:42``) as tree paths (``include/linux/mm.h``).

    The tree's root is read off the unit's own file: whatever precedes ``/<unit>`` in a declaration
    of a function defined there. Paths outside the tree (compiler headers) stay absolute.
    """
    files = {n: os.path.normpath(d.rsplit(":", 1)[0]) if ":" in d else os.path.normpath(d)
             for n, d in decls.items() if d}
    root = None
    for f in files.values():
        if f.endswith("/" + unit):
            root = f[: -len(unit)]
            break
    out = {}
    for n, f in files.items():
        if root and f.startswith(root):
            f = f[len(root):]
        out[n] = f
    return out


def _place(root: MapNode, file: str, leaf: MapNode) -> None:
    parts = [p for p in file.split("/") if p] or [file]
    node, path = root, ""
    for i, part in enumerate(parts):
        path = f"{path}/{part}" if path else part
        kind = "file" if i == len(parts) - 1 else "dir"
        nxt = next((c for c in node.children if c.name == part and c.kind == kind), None)
        if nxt is None:
            nxt = MapNode(part, kind, path=("/" + path) if file.startswith("/") else path)
            node.children.append(nxt)
        node = nxt
    leaf.path = file
    node.children.append(leaf)


def _total(node: MapNode) -> None:
    """Parents' value, size and delta are their children's sums; children largest first."""
    if not node.children:
        return
    for c in node.children:
        _total(c)
    node.value = sum(c.value for c in node.children)
    node.size = sum(c.size for c in node.children)
    node.delta = sum(c.delta for c in node.children)
    node.children.sort(key=lambda c: (-c.value, c.name))


def _functions(symbols: Iterable[Sym]) -> dict[str, Sym]:
    """Function symbols by name; aliases (one address, several names) counted once, as bytes are."""
    out: dict[str, Sym] = {}
    seen: set[tuple] = set()
    for s in symbols:
        if s.letter not in FUNCTION_LETTERS or s.size <= 0:
            continue
        at = (s.section, s.offset)
        if s.offset is not None and at in seen:
            continue
        seen.add(at)
        out[s.name] = s
    return out


def _file_of(name: str, files: dict[str, str], unit: str) -> str:
    return files.get(name) or files.get(parse(name).base) or unit


def _others(funcs: dict[str, Sym], text_total: int, sections: dict[str, int]) -> list[tuple[str, int]]:
    """The text bytes outside function symbols: padding per code section, then everything else."""
    in_section: dict[str, int] = {}
    for s in funcs.values():
        in_section[s.section or "?"] = in_section.get(s.section or "?", 0) + s.size
    out = []
    for sec, n in sorted(in_section.items()):
        pad = sections.get(sec, n) - n
        if pad > 0:
            out.append((f"padding and unnamed code in {sec}", pad))
    rest = text_total - sum(in_section.values()) - sum(n for _, n in out)
    if rest:
        out.append(("read-only data, strings and tables", rest))
    return out


def build_map(symbols: Iterable[Sym], decls: dict[str, str], target: str, text_total: int,
              sections: dict[str, int]) -> MapNode:
    """The text bytes of one object (``size``'s text, ``text_total``) by directory, file and function."""
    unit = unit_file(target)
    files = tree_relative(decls, unit)
    funcs = _functions(symbols)
    root = MapNode(target, "root", path="")
    for s in funcs.values():
        _place(root, _file_of(s.name, files, unit), MapNode(s.name, "function", s.size, s.size))
    other = MapNode(NOT_FUNCTIONS, "dir", path=NOT_FUNCTIONS)
    for name, n in _others(funcs, text_total, sections):
        other.children.append(MapNode(name, "other", n, n, path=NOT_FUNCTIONS))
    if other.children:
        root.children.append(other)
    _total(root)
    return root


def diff_map(old_symbols: Iterable[Sym], new_symbols: Iterable[Sym], decls: dict[str, str], target: str,
             old_text: int, new_text: int, old_sections: dict[str, int], new_sections: dict[str, int]) -> MapNode:
    """What a patch changed, placed the same way: each changed function's area is |delta|, its sign the
    colour; the text bytes outside functions are one leaf per kind, so the deltas sum to the change in
    ``size``'s text. ``decls`` should hold both builds' declarations (the new one's win)."""
    unit = unit_file(target)
    files = tree_relative(decls, unit)
    old, new = _functions(old_symbols), _functions(new_symbols)
    root = MapNode(target, "root")
    for name in sorted(old.keys() | new.keys()):
        a = old[name].size if name in old else None
        b = new[name].size if name in new else 0
        d = b - (a or 0)
        if d:
            _place(root, _file_of(name, files, unit), MapNode(name, "function", abs(d), b, a, d))
    other = MapNode(NOT_FUNCTIONS, "dir", path=NOT_FUNCTIONS)
    before = dict(_others(old, old_text, old_sections))
    after = dict(_others(new, new_text, new_sections))
    for name in sorted(before.keys() | after.keys()):
        d = after.get(name, 0) - before.get(name, 0)
        if d:
            other.children.append(MapNode(name, "other", abs(d), after.get(name, 0), before.get(name, 0), d,
                                          path=NOT_FUNCTIONS))
    if other.children:
        root.children.append(other)
    _total(root)
    return root

"""Which functions are on a hot path: the page allocator's fast path by default, or a user's list.

A list file has one glob pattern per line (``__rmqueue*``), ``#`` comments, ``-pattern``
to drop a default entry, and a first line ``!replace`` to start from an empty list.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from analyzer.clones import parse as parse_clone
from analyzer.errors import InputError
from analyzer.files import Unreadable, read_input

DEFAULT_HOT = (
    "__alloc_pages", "get_page_from_freelist", "rmqueue", "rmqueue_bulk", "rmqueue_buddy",
    "__rmqueue", "__rmqueue_smallest", "__rmqueue_fallback", "__rmqueue_cma_fallback",
    "__rmqueue_pcplist", "rmqueue_pcplist", "prep_new_page", "post_alloc_hook",
    "free_pcppages_bulk", "free_unref_page*", "free_one_page", "__free_one_page",
    "free_pcp_prepare", "free_pages_prepare", "__free_pages_ok", "free_the_page",
    "__free_pages", "del_page_from_free_list", "add_to_free_list*", "expand",
)


@dataclass(frozen=True)
class HotPaths:
    patterns: tuple[str, ...] = DEFAULT_HOT

    def __contains__(self, name: str) -> bool:
        base = parse_clone(name).base
        return any(fnmatch.fnmatchcase(base, p) for p in self.patterns)


def load(path: str | Path | None = None) -> HotPaths:
    """The default list, extended (or replaced, or trimmed) by a user file."""
    if path is None:
        return HotPaths()
    try:
        lines = read_input(path).decode("utf-8", "replace").splitlines()
    except Unreadable as e:
        raise InputError(f"{path}: cannot read hot-path list ({e.reason})") from None
    pats = list(DEFAULT_HOT)
    first = True
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if first and line == "!replace":
            pats = []
        elif line.startswith("-"):
            drop = line[1:].strip()
            pats = [p for p in pats if p != drop]
        elif any(c.isspace() for c in line):
            raise InputError(f"{path}: bad hot-path pattern {line!r} (one name or glob per line)")
        else:
            pats.append(line)
        first = False
    return HotPaths(tuple(dict.fromkeys(pats)))

"""One row per (source function, build): what a function's history reads (table ``function_sizes``,
migration 0009), computed from a build's objects when the build is recorded.

A source function's size is bloat-o-meter's view of what it costs: its text symbols, clones
included (``foo``, ``foo.part.0``, ``foo.cold``, ``foo.constprop.0.isra.0``), summed over the
build's objects. Its inline status is the analyzer's facts for ``foo``. The migration backfills
older builds by the same rule in SQL.
"""
from __future__ import annotations

from db.models import ObjectRecord

TEXT_LETTERS = frozenset("tTwW")


def source_name(symbol: str) -> str | None:
    """The name a symbol is counted under: up to its first dot (None: no such name, e.g. ``.L0``)."""
    if symbol.startswith("."):
        return None
    dot = symbol.find(".")
    return symbol if dot < 0 else symbol[:dot]


def function_sizes(objects: list[ObjectRecord]) -> dict[str, list]:
    """{name: [size, declared, out_of_line, inlined_count]}; None where there is no symbol or no facts.

    Facts come from the last object that has them (a directory target holds several).
    """
    out: dict[str, list] = {}
    for obj in objects:
        for s in obj.symbols:
            if s.letter in TEXT_LETTERS and (name := source_name(s.name)) is not None:
                row = out.get(name)
                if row is None:
                    out[name] = [s.size, None, None, None]
                else:
                    row[0] = s.size if row[0] is None else row[0] + s.size
    for obj in objects:
        for f in obj.functions:
            if "." in f.name:
                continue
            row = out.setdefault(f.name, [None, None, None, None])
            row[1:] = [f.declared, bool(f.out_of_line), f.inlined_count]
    return out

"""bloat-o-meter tables as stored with a comparison (table ``comparison_tables``, migration 0009).

A report's tables are computed once, when the pipeline records the comparison, and read back
as the same ``Comparison`` objects: counts, totals and rows as bloat-o-meter prints them, so the
text is byte-identical. Of the per-symbol sizes only the clone families of the changed rows are
kept (``foo`` with ``foo.part``, ``foo.cold``... when one of them changed): what clone grouping
reads (analyzer.formats.clone_groups, the patch page), a few dozen names instead of every symbol.
"""
from __future__ import annotations

from analyzer.bloat import Comparison, Row
from analyzer.clones import parse

FORMAT = 1          # bump when the computation changes: stored tables of another format are recomputed

_COUNTS = ("add", "remove", "grow", "shrink", "up", "down", "old_total", "new_total")


def to_stored(tables: list[Comparison]) -> dict:
    """The JSON-able form the store keeps."""
    out = []
    for t in tables:
        bases = {parse(r.name).base for r in t.rows}
        out.append({"title": t.title, **{k: getattr(t, k) for k in _COUNTS},
                    "rows": [[r.name, r.old, r.new, r.delta] for r in t.rows],
                    "old": {n: z for n, z in t.old_sizes.items() if parse(n).base in bases},
                    "new": {n: z for n, z in t.new_sizes.items() if parse(n).base in bases}})
    return {"format": FORMAT, "tables": out}


def from_stored(doc: dict | None) -> list[Comparison] | None:
    """The tables back, or None when there are none of this format (compute them instead)."""
    if not doc or doc.get("format") != FORMAT:
        return None
    return [Comparison(t["title"], *(t[k] for k in _COUNTS[:6]), rows=[Row(*r) for r in t["rows"]],
                       old_total=t["old_total"], new_total=t["new_total"], old_sizes=t["old"], new_sizes=t["new"])
            for t in doc["tables"]]

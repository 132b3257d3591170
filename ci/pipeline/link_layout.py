"""Hot functions at link addresses (analyzer.link_layout) as the pipeline stores and compares them.

Only linked targets (``vmlinux``) have link addresses: for them the build stores where each hot
function sits (``ObjectRecord.link_layout``), and a comparison with the parent's build stores how far
each moved and why, with the link findings (``analyzer.findings.link_compare``). The comparison is
made from the store alone (the stored symbols of the sections holding hot functions), so it needs
neither vmlinux file: the pipeline keeps only the newest ones.
"""
from __future__ import annotations

from pathlib import Path

from analyzer import findings as _findings
from analyzer.hotpaths import HotPaths
from analyzer.link_layout import HotPlacement, Move, compare, file_layout, text_map_from_rows
from db.models import FindingRow
from db.store import Store
from toolchains.targets import is_linked

CAUSES_KEPT = 12             # causes stored per move (the largest; the by_* sums keep every byte)


def layout(path: Path, target: str, hot: HotPaths | None = None) -> list[HotPlacement]:
    """The hot functions of a built target at their link addresses; [] for targets that are not linked."""
    if not is_linked(target):
        return []
    lay, _ = file_layout(path, hot)
    return lay.functions


def compare_builds(store: Store, base_id: int, head_id: int, hot: HotPaths | None = None
                   ) -> tuple[list[Move] | None, list[FindingRow]]:
    """The moves of the hot functions between two stored builds and their findings; (None, []) when
    either build has no link layout (not linked, or analyzed before 0015)."""
    base, head = store.link_layout_for(base_id), store.link_layout_for(head_id)
    moves: list[Move] = []
    found: list[FindingRow] = []
    common = sorted(base.keys() & head.keys())
    if not common:
        return None, []
    for path in common:
        sections = sorted({p.section for p in base[path] + head[path]})
        rows = store.text_symbols([base_id, head_id], path, sections)
        bm, hm = text_map_from_rows(rows[base_id]), text_map_from_rows(rows[head_id])
        got = compare(bm, hm, hot)
        found += [FindingRow(f.kind, f.function, f.severity, f.message, f.to_dict())
                  for f in _findings.link_compare(got, CAUSES_KEPT)]
        moves += [m.trimmed(CAUSES_KEPT) for m in got]
    return moves, found

"""What a dashboard cell counts of one build's findings against its base build.

The findings counted are the ones a report lists: the changes against that base, plus the build's
own findings that the base build does not have; the own findings the base has too are only
counted as ``carried``. ``worst`` is the id of the most severe finding (changes before the build's
own). ``Store.record_comparison`` stores these counts with the comparison (migration 0009), so
the index and series pages read one row per build instead of every finding; builds without a
stored comparison are counted on read by the same function.
"""
from __future__ import annotations

from typing import Iterable

from analyzer.kinds import order, severity_rank

# (build_id, base_build_id, kind, function, severity, finding id): the findings_summary index's columns
FindingKey = tuple[int, "int | None", str, str, str, int]


def count_findings(rows: Iterable[FindingKey], base_build_id: int | None, before: set[tuple[str, str]]) -> dict:
    """``rows``: the build's findings; ``before``: (kind, function) of the base build's own findings
    (empty when the base is missing or failed). Returns {severities, kinds, carried, worst}."""
    severities: dict[str, int] = {}
    kinds: dict[str, int] = {}
    carried, best = 0, None
    for _, b, kind, function, severity, fid in rows:
        if b is None and (kind, function) in before:
            carried += 1
            continue
        if b is not None and b != base_build_id:
            continue
        severity = severity or "info"
        severities[severity] = severities.get(severity, 0) + 1
        kinds[kind] = kinds.get(kind, 0) + 1
        key = (severity_rank(severity), b is None, order(kind), function, fid)   # report order (analyzer.kinds)
        if best is None or key < best:
            best = key
    return {"severities": dict(sorted(severities.items(), key=lambda kv: severity_rank(kv[0]))),
            "kinds": kinds, "carried": carried, "worst": best[-1] if best is not None else None}


def own_keys(rows: Iterable[FindingKey]) -> set[tuple[str, str]]:
    """(kind, function) of a build's own findings (those about the build alone)."""
    return {(kind, function) for _, b, kind, function, _, _ in rows if b is None}

"""The store's change counters (migration 0012), read per request to key cached pages.

A stored result never changes once written; a page changes only when rows under it are written,
and the triggers of 0012 bump a counter in the same transaction as those rows. A page's *stamp* is
the counters under it: the store's identity, the schema's counter, and either the whole store's
counter (pages over everything: the index, a function's history) or the counters of the commits
and series the page shows. Equal stamps mean equal pages; one small indexed read per request.
"""
from __future__ import annotations

import sqlite3

Stamp = tuple


def _counters(conn: sqlite3.Connection, scopes: list[str]) -> tuple:
    marks = ",".join("?" * len(scopes))
    got = dict(conn.execute(f"SELECT scope, n FROM change_counters WHERE scope IN ({marks})", scopes))
    return tuple((s, got.get(s, 0)) for s in scopes)


BASE = ["store_id", "schema"]


def store_stamp(conn: sqlite3.Connection) -> Stamp:
    """Any write anywhere: for pages that read across the store (the index, a function's history)."""
    return _counters(conn, [*BASE, "store"])


def commit_stamp(conn: sqlite3.Connection, rev: str) -> Stamp:
    """A commit page (or its matrix): the commits that ``rev`` names (a prefix may name several: the
    page then says it is ambiguous) and their parents: a parent's new build is the patch's new delta.
    A parent not stored yet has no counter; when it is stored its counter appears and the stamp moves."""
    rev = rev.strip().lower()
    rows = conn.execute(
        "SELECT c.id, p.id FROM commits c LEFT JOIN commits p ON p.tree_id = c.tree_id AND p.sha = c.parent_sha "
        "WHERE c.sha >= ? AND c.sha < ? LIMIT 3", (rev, rev + "g")).fetchall()
    ids = sorted({i for row in rows for i in row if i is not None})
    # no such commit yet: the page is a 404 (never cached), but its stamp still moves when it appears
    return _counters(conn, [*BASE, *(f"c:{i}" for i in ids)]) + (("commits", tuple(ids)),)


def series_stamp(conn: sqlite3.Connection, sid: int) -> Stamp:
    """A series page: the series row and its patches, the patches' commits and their parents (each
    cell is a patch's delta against its parent's build)."""
    ids = sorted({i for row in conn.execute(
        "SELECT c.id, p.id FROM series_patches sp JOIN series s ON s.id = sp.series_id "
        "JOIN commits c ON c.tree_id = s.tree_id AND c.sha = sp.commit_sha "
        "LEFT JOIN commits p ON p.tree_id = c.tree_id AND p.sha = c.parent_sha WHERE sp.series_id = ?", (sid,))
        for i in row if i is not None})
    return _counters(conn, [*BASE, f"s:{sid}", *(f"c:{i}" for i in ids)]) + (("commits", tuple(ids)),)

"""The store's what the dashboard lists (part of ``db.store.SqliteStore``, split out by what it keeps).

What the dashboard lists: commits, series, build summaries, trees, change stamps. A mixin: it only uses ``self._conn()``/``self._tx()`` and the other parts' methods,
so ``SqliteStore`` and ``PgStore`` answer every one of them alike."""
from __future__ import annotations

import json
from typing import Iterable

from db import changes as _changes
from db.sqlite import compress, decompress, loads, number, retry_busy as _retry_busy, summed
from db.finding_counts import count_findings, own_keys
from db.models import BuildSummary, Commit, FindingRow, Series, SeriesPatch

from db.rows import _now


class DashboardRows:
    def record_series(self, s: Series) -> int:
        with self._tx() as conn:
            tid = self._tree_id(conn, s.tree)
            conn.execute(
                "INSERT INTO series(tree_id, message_id, version, subject, author, date, cover_z, base_sha, status, "
                "error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(tree_id, message_id, base_sha) DO UPDATE SET version = excluded.version, "
                "subject = excluded.subject, author = excluded.author, date = excluded.date, "
                "cover_z = excluded.cover_z, status = excluded.status, error = excluded.error",
                (tid, s.message_id, s.version, s.subject, s.author, s.date, compress(s.cover) if s.cover else None,
                 s.base_sha, s.status, s.error, s.created_at or _now()))
            sid = conn.execute("SELECT id FROM series WHERE tree_id = ? AND message_id = ? AND base_sha = ?",
                               (tid, s.message_id, s.base_sha)).fetchone()[0]
            conn.execute("DELETE FROM series_patches WHERE series_id = ?", (sid,))
            conn.executemany("INSERT INTO series_patches(series_id, position, message_id, subject, author, "
                             "commit_sha, status, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             [(sid, p.position, p.message_id, p.subject, p.author, p.commit_sha, p.status, p.error)
                              for p in s.patches])
            return sid

    @_retry_busy
    def list_commits(self, limit: int = 50, offset: int = 0, tree: str | None = None) -> list[Commit]:
        """Most recently stored commits that have builds or belong to a series."""
        q = ("SELECT c.sha, c.parent_sha, c.subject, c.author, c.date, t.name, c.id, c.generation FROM commits c "
             "JOIN trees t ON t.id = c.tree_id WHERE (EXISTS (SELECT 1 FROM builds b WHERE b.commit_id = c.id) "
             "OR EXISTS (SELECT 1 FROM series_patches p WHERE p.commit_sha = c.sha))")
        args: list = []
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        q += " ORDER BY c.id DESC LIMIT ? OFFSET ?"
        return [Commit(*r) for r in self._conn().execute(q, [*args, limit, offset])]

    def _series(self, rows: list[tuple]) -> list[Series]:
        conn = self._conn()
        out = []
        for (sid, tree, mid, ver, subj, author, date, cover_z, base, status, err, created) in rows:
            patches = [SeriesPatch(*p) for p in conn.execute(
                "SELECT position, subject, message_id, author, commit_sha, status, error FROM series_patches "
                "WHERE series_id = ? ORDER BY position", (sid,))]
            cover = decompress(cover_z, f"cover letter of series {sid}")
            ver = number(ver, f"version of series {sid}", 1)
            out.append(Series(tree, mid, subj, ver, author, date, cover, base, status, err, created,
                              patches, sid))
        return out

    @_retry_busy
    def list_series(self, limit: int = 50, offset: int = 0, tree: str | None = None) -> list[Series]:
        q, args = self._SERIES_SELECT, []
        if tree:
            q += " WHERE t.name = ?"
            args.append(tree)
        rows = self._conn().execute(q + " ORDER BY s.id DESC LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
        return self._series(rows)

    @_retry_busy
    def get_series(self, ref: int | str) -> Series | None:
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            rows = self._conn().execute(self._SERIES_SELECT + " WHERE s.id = ?", (int(ref),)).fetchall()
        else:
            mid = ref.strip()
            mid = mid if mid.startswith("<") else f"<{mid}>"
            rows = self._conn().execute(self._SERIES_SELECT + " WHERE s.message_id = ? ORDER BY s.id DESC LIMIT 1",
                                        (mid,)).fetchall()
        got = self._series(rows)
        return got[0] if got else None

    @_retry_busy
    def series_for_commit(self, sha: str) -> list[Series]:
        rows = self._conn().execute(
            self._SERIES_SELECT + " WHERE s.id IN (SELECT series_id FROM series_patches WHERE commit_sha = ?) "
            "ORDER BY s.id DESC", (sha,)).fetchall()
        return self._series(rows)

    @_retry_busy
    def build_summaries(self, shas: list[str], tree: str | None = None) -> list[BuildSummary]:
        """A handful of set-wise queries for any number of commits (the dashboard asks for ~100 at once)."""
        if not shas:
            return []
        conn = self._conn()
        q = ("SELECT b.id, c.sha, c.parent_sha, t.name, tc.name, tc.version, cf.key, b.target, b.status, b.errors, "
             "cf.arch "
             "FROM builds b JOIN commits c ON c.id = b.commit_id JOIN trees t ON t.id = c.tree_id "
             "JOIN toolchains tc ON tc.id = b.toolchain_id JOIN configs cf ON cf.id = b.config_id "
             "WHERE c.sha IN (SELECT value FROM json_each(?))")
        tree_q, tree_a = (" AND t.name = ?", [tree]) if tree else ("", [])
        heads: dict[tuple, tuple] = {}
        parents: dict[str, str | None] = {}
        bases: dict[tuple, tuple[int, str]] = {}       # any build as a base: ordered by id, the latest wins

        def base_rows(rows: Iterable[tuple]) -> None:
            for bid, sha, _, tname, tc, ver, key, target, status, _, _ in rows:
                bases[(tname, sha, tc, ver, key, target)] = (bid, status)
        rows = conn.execute(q + tree_q + " ORDER BY b.id", [json.dumps(list(shas)), *tree_a]).fetchall()
        for row in rows:
            bid, sha, parent, tname, tc, ver, key, target = row[:8]
            heads[(sha, tc, key, target)] = row          # ordered by id: the latest build wins
            parents[sha] = parent
        base_rows(rows)
        # the parents not asked for themselves (along a history most are: a page lists runs of commits)
        wanted_parents = sorted({p for p in parents.values() if p} - set(parents))
        if wanted_parents:
            base_rows(conn.execute(q + tree_q + " ORDER BY b.id", [json.dumps(wanted_parents), *tree_a]))
        out: list[BuildSummary] = []
        for (sha, tc, key, target), (bid, _, parent, tname, _, ver, _, _, status, errors, arch) in heads.items():
            base = bases.get((tname, parent, tc, ver, key, target)) if parent else None
            out.append(BuildSummary(sha, bid, tc, ver, key, target, status,
                                    loads(errors, f"errors of build {bid}", list) if errors != "[]" else [], None,
                                    base[0] if base else None, base[1] if base else None, arch=arch))
        ids = [s.build_id for s in out] + [s.base_build_id for s in out if s.base_build_id is not None]
        ids_json = json.dumps(ids)
        text = dict(conn.execute("SELECT build_id, sum(text) FROM objects WHERE build_id IN "
                                 "(SELECT value FROM json_each(?)) GROUP BY build_id", (ids_json,)))
        text = {b: summed(n, f"sizes of objects of build {b}") for b, n in text.items()}
        for s in out:
            s.text = text.get(s.build_id) if s.status == "ok" else None
            s.base_text = text.get(s.base_build_id) if s.base_status == "ok" else None
        # counts stored with the comparison (0009), all in one JSON document (~500 small json.loads calls
        # cost ~4 ms); builds without stored counts are counted here from their findings
        (doc,) = conn.execute(
            "SELECT json_group_array(json_array(build_id, base_build_id, json(counts))) FROM comparisons "
            "WHERE json_valid(counts) AND "           # damaged counts: counted again from the findings below
            "counts IS NOT NULL AND build_id IN (SELECT value FROM json_each(?))",
            (json.dumps([s.build_id for s in out]),)).fetchone()
        stored = {(b, base): c for b, base, c in json.loads(doc)}
        counts: list[dict | None] = [stored.get((s.build_id, s.base_build_id)) if s.base_status == "ok" else None
                                     for s in out]
        missing = [s for s, c in zip(out, counts) if c is None]
        if missing:
            found = self._finding_keys(conn, [s.build_id for s in missing] +
                                       [s.base_build_id for s in missing if s.base_status == "ok"])
            for k, s in enumerate(out):
                if counts[k] is None:
                    before = own_keys(found.get(s.base_build_id, ())) if s.base_status == "ok" else set()
                    counts[k] = count_findings(found.get(s.build_id, ()), s.base_build_id, before)
        worst_ids: dict[int, BuildSummary] = {}
        for s, c in zip(out, counts):
            s.severities, s.kinds, s.carried = c["severities"], c["kinds"], c["carried"]
            if c["worst"] is not None:
                worst_ids[c["worst"]] = s
        if worst_ids:                   # messages only for each build's worst finding: the rest are counted
            for fid, kind, fn, sev, msg, b in conn.execute(
                    "SELECT id, kind, function, severity, message, base_build_id FROM findings "
                    "WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(list(worst_ids)),)):
                worst_ids[fid].worst = FindingRow(kind, fn, sev, msg, {}, b)
        return out

    @_retry_busy
    def tree_path(self, name: str) -> str | None:
        row = self._conn().execute("SELECT path FROM trees WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    @_retry_busy
    def change_stamp(self, commit: str | None = None, series: int | None = None) -> tuple:
        conn = self._conn()
        if commit is not None:
            return _changes.commit_stamp(conn, commit)
        if series is not None:
            return _changes.series_stamp(conn, series)
        return _changes.store_stamp(conn)

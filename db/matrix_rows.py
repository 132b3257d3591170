"""The store's the matrix page's tables (part of ``db.store.SqliteStore``, split out by what it keeps).

The matrix page's tables: written with a commit's builds, ranked, read back. A mixin: it only uses ``self._conn()``/``self._tx()`` and the other parts' methods,
so ``SqliteStore`` and ``PgStore`` answer every one of them alike."""
from __future__ import annotations

import json
import sqlite3

from db import matrix as _matrix
from db.sqlite import number, retry_busy as _retry_busy, summed
from db.models import Build, MatrixRow
from toolchains.flavour import label as column_label, lto_of_key



class MatrixRows:
    def _write_matrix(self, conn: sqlite3.Connection, commit_id: int, sha: str, tree: str) -> None:
        """The commit's matrix rows (db.matrix) per arch, for every target and for all of them, ranked
        now, in the transaction that changed its builds (0013): a reader never sees rows of other builds."""
        pairs = conn.execute("SELECT DISTINCT cf.arch, b.target FROM builds b JOIN configs cf ON cf.id = b.config_id "
                             "WHERE b.commit_id = ?", (commit_id,)).fetchall()
        conn.execute("DELETE FROM matrix_rows WHERE commit_id = ?", (commit_id,))
        conn.execute("DELETE FROM matrix_tables WHERE commit_id = ?", (commit_id,))
        for arch in sorted({a for a, _ in pairs}):
            for target in [None, *sorted(t for a, t in pairs if a == arch)]:
                self._write_table(conn, commit_id, sha, tree, target, arch)

    def _write_table(self, conn: sqlite3.Connection, commit_id: int, sha: str, tree: str, target: str | None,
                     arch: str) -> None:
        """One ranked table of the commit (``db.matrix.table_key``) and its rows."""
        table = _matrix.rank(self.toolchain_matrix(sha, tree, target, arch))
        key = _matrix.table_key(target, arch)
        conn.execute("INSERT INTO matrix_tables(commit_id, target, toolchains, functions, differing) "
                     "VALUES (?, ?, ?, ?, ?)", (commit_id, key, json.dumps(table.toolchains), table.functions,
                                                table.differing))
        rows, d = [], 0
        for i, line in enumerate(table.lines):
            rows.append((commit_id, key, i, d if line.differs else None, line.function, line.spread,
                         json.dumps({tc: list(c) for tc, c in line.cells.items()}, separators=(",", ":"))))
            d += line.differs
        conn.executemany("INSERT INTO matrix_rows(commit_id, target, pos, diff_pos, function, spread, cells) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def refresh_matrices(self, only_missing: bool = True) -> int:
        """Rank the matrix rows of stored commits that have builds (those stored before 0013, or all):
        one transaction per commit. Returns how many commits were ranked."""
        q = ("SELECT c.id, c.sha, t.name FROM commits c JOIN trees t ON t.id = c.tree_id "
             "WHERE EXISTS (SELECT 1 FROM builds b WHERE b.commit_id = c.id)")
        if only_missing:
            q += " AND NOT EXISTS (SELECT 1 FROM matrix_tables m WHERE m.commit_id = c.id)"
        todo = self._conn().execute(q + " ORDER BY c.id").fetchall()
        for cid, sha, tree in todo:
            with self._tx() as conn:
                self._write_matrix(conn, cid, sha, tree)
        return len(todo)

    @_retry_busy
    def toolchain_matrix(self, sha: str, tree: str | None = None, target: str | None = None,
                         arch: str = "x86_64") -> list[MatrixRow]:
        """Every function of a commit's builds for ``arch``, one cell per toolchain and LTO mode (latest
        build of each)."""
        builds: dict[str, Build] = {}
        for b in self.builds_for_commit(sha, tree):
            if b.status == "ok" and b.arch == arch and (target is None or b.target == target):
                builds[column_label(b.toolchain, lto=lto_of_key(b.config_key))] = b     # ordered by id: the latest wins
        conn = self._conn()
        ids = json.dumps([b.id for b in builds.values()])
        # one JSON object per build, gathered by sqlite (see _history_columns: rows cost more than the query)
        sizes = {bid: json.loads(doc) for bid, doc in conn.execute(
            "SELECT build_id, json_group_object(name, size) FROM (SELECT o.build_id AS build_id, n.name AS name, "
            "sum(s.size) AS size FROM objects o JOIN symbols s ON s.object_id = o.id JOIN names n ON n.id = s.name_id "
            "WHERE o.build_id IN (SELECT value FROM json_each(?)) AND s.letter IN ('t','T','w','W') "
            "GROUP BY o.build_id, n.name) AS per_name GROUP BY build_id", (ids,))}
        facts = {bid: json.loads(doc) for bid, doc in conn.execute(
            "SELECT o.build_id, json_group_object(n.name, json_array(f.declared, f.out_of_line, f.inlined_count)) "
            "FROM objects o JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id "
            "WHERE o.build_id IN (SELECT value FROM json_each(?)) GROUP BY o.build_id", (ids,))}
        cells: dict[str, dict] = {}
        for label, b in builds.items():
            what = f"symbols of build {b.id}"
            for name, size in sizes.get(b.id, {}).items():
                cells.setdefault(name, {})[label] = [summed(size, what), None, None, None]
            for name, (decl, ool, ic) in facts.get(b.id, {}).items():
                cell = cells.setdefault(name, {}).setdefault(label, [None, None, None, None])
                cell[1:] = [decl, bool(number(ool, what)), number(ic, what)]
        out = []
        for name in sorted(cells):
            row = {label: tuple(cells[name].get(label, (None, None, None, None))) for label in builds}
            out.append(MatrixRow(name, row))
        return out

    @_retry_busy
    def matrix_table(self, sha: str, tree: str | None, target: str | None, show_all: bool, limit: int,
                     offset: int, arch: str = "x86_64") -> _matrix.MatrixTable | None:
        conn = self._conn()
        q = ("SELECT m.commit_id, m.toolchains, m.functions, m.differing FROM matrix_tables m "
             "JOIN commits c ON c.id = m.commit_id JOIN trees t ON t.id = c.tree_id WHERE c.sha = ? AND m.target = ?")
        key = _matrix.table_key(target, arch)
        args: list = [sha, key]
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        head = conn.execute(q, args).fetchone()
        if head is None:
            return None
        cid, tcs, functions, differing = head
        if show_all:
            rows = conn.execute("SELECT function, spread, diff_pos, cells FROM matrix_rows WHERE commit_id = ? "
                                "AND target = ? ORDER BY pos LIMIT ? OFFSET ?", (cid, key, limit, offset))
        else:
            rows = conn.execute("SELECT function, spread, diff_pos, cells FROM matrix_rows WHERE commit_id = ? "
                                "AND target = ? AND diff_pos IS NOT NULL ORDER BY diff_pos LIMIT ? OFFSET ?",
                                (cid, key, limit, offset))
        lines = []
        try:
            tcs = json.loads(tcs)
            for f, spread, pos, cells in rows:
                cells = json.loads(cells)
                if type(spread) is not int or not isinstance(cells, dict) or not all(
                        isinstance(c, list) and len(c) == 5 for c in cells.values()):
                    return None
                lines.append(_matrix.MatrixLine(f, spread, pos is not None, {tc: tuple(c) for tc, c in cells.items()}))
        except (ValueError, TypeError):
            return None             # damaged ranking: ranked again from the builds' own rows, per request
        if not isinstance(tcs, list) or type(functions) is not int or type(differing) is not int:
            return None
        return _matrix.MatrixTable(tcs, functions, differing, lines)

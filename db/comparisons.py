"""The store's a build against its parent's (part of ``db.store.SqliteStore``, split out by what it keeps).

A build against its parent's: findings, bloat-o-meter tables and counts, computed once and stored. A mixin: it only uses ``self._conn()``/``self._tx()`` and the other parts' methods,
so ``SqliteStore`` and ``PgStore`` answer every one of them alike."""
from __future__ import annotations

import json
import sqlite3

from analyzer.link_layout import Move
from db.sqlite import compress, decompress, loads, retry_busy as _retry_busy
from db.finding_counts import count_findings, own_keys
from db.models import FindingRow



class ComparisonRows:
    def record_comparison(self, build_id: int, base_build_id: int, findings: list[FindingRow],
                          tables: dict | None = None, inline_cost: dict | None = None,
                          link_moves: list[Move] | None = None) -> None:
        with self._tx() as conn:
            if link_moves is not None:      # in the transaction that upserts the comparisons row (0015)
                conn.execute("DELETE FROM link_moves WHERE build_id = ? AND base_build_id = ?",
                             (build_id, base_build_id))
                ids = self._name_ids(conn, [m.name for m in link_moves])
                conn.executemany("INSERT INTO link_moves(build_id, base_build_id, pos, name_id, shift, data) "
                                 "VALUES (?, ?, ?, ?, ?, ?)",
                                 [(build_id, base_build_id, i, ids[m.name], max(-(1 << 63), min(m.shift, (1 << 63) - 1)),
                                   json.dumps(m.to_dict(), separators=(",", ":")))
                                  for i, m in enumerate(link_moves)])
            conn.execute("DELETE FROM findings WHERE build_id = ? AND base_build_id = ?", (build_id, base_build_id))
            self._insert_findings(conn, build_id, findings, base_build_id)
            found = self._finding_keys(conn, [build_id, base_build_id])
            counts = count_findings(found.get(build_id, ()), base_build_id, own_keys(found.get(base_build_id, ())))
            conn.execute("INSERT INTO comparisons(build_id, base_build_id, counts) VALUES (?, ?, ?) "
                         "ON CONFLICT(build_id, base_build_id) DO UPDATE SET counts = excluded.counts",
                         (build_id, base_build_id, json.dumps(counts)))
            if tables is not None:          # (they depend on the two builds' symbols alone: kept when not given)
                conn.execute("INSERT INTO comparison_tables(build_id, base_build_id, tables_z) VALUES (?, ?, ?) "
                             "ON CONFLICT(build_id, base_build_id) DO UPDATE SET tables_z = excluded.tables_z",
                             (build_id, base_build_id, compress(json.dumps(tables, separators=(",", ":")))))
            if inline_cost is not None:     # (in this transaction: the comparisons upsert's triggers cover it)
                conn.execute("INSERT INTO comparison_inline_costs(build_id, base_build_id, report_z) VALUES (?, ?, ?) "
                             "ON CONFLICT(build_id, base_build_id) DO UPDATE SET report_z = excluded.report_z",
                             (build_id, base_build_id, compress(json.dumps(inline_cost, separators=(",", ":")))))

    @staticmethod
    def _finding_keys(conn: sqlite3.Connection, build_ids: list[int]) -> dict[int, list[tuple]]:
        """Each build's findings as db.finding_counts reads them, from the findings_summary index alone
        (0007), never the rows with their JSON data."""
        found: dict[int, list[tuple]] = {}
        for row in conn.execute("SELECT build_id, base_build_id, kind, function, severity, id FROM findings "
                                "WHERE build_id IN (SELECT value FROM json_each(?))", (json.dumps(build_ids),)):
            found.setdefault(row[0], []).append(row)
        return found

    @_retry_busy
    def has_comparison(self, build_id: int, base_build_id: int) -> bool:
        return self._conn().execute("SELECT 1 FROM comparisons WHERE build_id = ? AND base_build_id = ?",
                                    (build_id, base_build_id)).fetchone() is not None

    @_retry_busy
    def comparison_tables(self, build_id: int, base_build_id: int) -> dict | None:
        row = self._conn().execute("SELECT tables_z FROM comparison_tables WHERE build_id = ? AND base_build_id = ?",
                                   (build_id, base_build_id)).fetchone()
        if not row:
            return None
        what = f"bloat-o-meter tables of build {build_id} vs {base_build_id}"
        got = loads(decompress(row[0], what), what)
        return got or None               # unreadable: computed again from the stored symbols

    @_retry_busy
    def comparison_inline_cost(self, build_id: int, base_build_id: int) -> dict | None:
        row = self._conn().execute("SELECT report_z FROM comparison_inline_costs WHERE build_id = ? "
                                   "AND base_build_id = ?", (build_id, base_build_id)).fetchone()
        if not row:
            return None
        what = f"inline cost of build {build_id} vs {base_build_id}"
        return loads(decompress(row[0], what), what) or None     # unreadable: compared again from the rows

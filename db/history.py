"""The store's a function along the commits (part of ``db.store.SqliteStore``, split out by what it keeps).

A function along the commits: sizes, inlining, likely paths, link addresses, inlined bytes, runtime. A mixin: it only uses ``self._conn()``/``self._tx()`` and the other parts' methods,
so ``SqliteStore`` and ``PgStore`` answer every one of them alike."""
from __future__ import annotations

import json
import sqlite3

from analyzer.link_layout import HotPlacement
from db.sqlite import note_damage, number, numbers, retry_busy as _retry_busy, summed
from db.models import Commit, FunctionLine, FunctionSeries, HistoryPoint, InlinePoint, RuntimePoint
from toolchains.flavour import lto_of_key



class HistoryRows:
    @_retry_busy
    def likely_path_points(self, name: str, build_ids: list[int]) -> dict[int, tuple[int, int | None]]:
        rows = self._conn().execute(
            "SELECT o.build_id, l.insns, l.cycles FROM names n JOIN likely_paths l ON l.name_id = n.id "
            "JOIN objects o ON o.id = l.object_id WHERE n.name = ? AND o.build_id IN (SELECT value FROM json_each(?))",
            (name, json.dumps(build_ids)))
        return {b: (number(i, f"likely path of {name} (build {b})"),
                    number(c, f"likely path of {name} (build {b})", None))
                for b, i, c in rows}

    @_retry_busy
    def inline_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                       target: str | None = None) -> list[InlinePoint]:
        """Ordered as function_history: by commit (generation, then date), toolchain name, build id."""
        conn = self._conn()
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        if nid is None or conn.execute("SELECT 1 FROM inline_callees WHERE name_id = ? LIMIT 1",
                                       (nid[0],)).fetchone() is None:
            return []
        where, args = self._build_filters(toolchain, tree, target)
        got: dict[int, list] = {}
        for bid, inst, by, incl, callers, units, decl in conn.execute(
                "SELECT o.build_id, c.instances, c.bytes, c.including, c.callers, c.units, d.name "
                "FROM inline_callees c JOIN objects o ON o.id = c.object_id LEFT JOIN names d ON d.id = c.decl_file_id "
                "WHERE c.name_id = ?", (nid[0],)):
            p = got.setdefault(bid, [0, 0, 0, 0, 0, []])
            for i, v in enumerate((inst, by, incl, callers, units)):
                p[i] += number(v, f"inline cost of {name} (build {bid})")
            if decl and decl not in p[5]:
                p[5].append(decl)
        rows = conn.execute(f"SELECT DISTINCT b.id, b.commit_id, b.toolchain_id, b.target FROM builds b "
                            f"JOIN objects o ON o.build_id = b.id JOIN inline_costs i ON i.object_id = o.id "
                            f"WHERE 1 = 1{where}", args).fetchall()
        commits, tcs = self._commits_by_id({r[1] for r in rows}), self._toolchain_names()
        rows = self._placed(rows, commits, tcs, 1, 2)
        rows.sort(key=lambda r: (self._history_order(commits[r[1]]), tcs[r[2]][0], r[0]))
        out = []
        flavours = self._flavours(r[0] for r in rows)
        for bid, cid, tcid, tgt in rows:
            c = commits[cid]
            inst, by, incl, callers, units, decls = got.get(bid, [0, 0, 0, 0, 0, []])
            out.append(InlinePoint(c.sha, c.subject, c.date, *tcs[tcid], tgt, bid, inst, by, incl, callers, units,
                                   sorted(decls), *flavours.get(bid, ("x86_64", ""))))
        return out

    @_retry_busy
    def runtime_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                        target: str | None = None) -> list[RuntimePoint]:
        """Ordered as function_history: by commit (generation, then date), toolchain name, build id."""
        conn = self._conn()
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        if nid is None:
            return []
        got: dict[int, dict[int, tuple[float, float, int]]] = {}
        for bid, order, ins, calls, lines in conn.execute(
                "SELECT build_id, page_order, instructions, calls, lines FROM runtime_functions WHERE name_id = ? "
                "ORDER BY build_id, page_order", (nid[0],)):
            got.setdefault(bid, {})[order] = (ins, calls, lines)
        if not got:
            return []
        where, args = self._build_filters(toolchain, tree, target)
        rows = conn.execute(f"SELECT b.id, b.commit_id, b.toolchain_id, b.target FROM builds b "
                            f"JOIN runtimes r ON r.build_id = b.id WHERE r.status = 'ok'{where}", args).fetchall()
        commits, tcs = self._commits_by_id({r[1] for r in rows}), self._toolchain_names()
        rows.sort(key=lambda r: (self._history_order(commits[r[1]]), tcs[r[2]][0], r[0]))
        return [RuntimePoint(commits[cid].sha, commits[cid].subject, commits[cid].date, *tcs[tcid], tgt, bid,
                             got.get(bid, {})) for bid, cid, tcid, tgt in rows]

    @_retry_busy
    def link_points(self, name: str, build_ids: list[int]) -> dict[int, HotPlacement]:
        rows = self._conn().execute(
            f"SELECT o.build_id, {self._PLACEMENT} FROM names n JOIN link_layouts l ON l.name_id = n.id "
            "JOIN objects o ON o.id = l.object_id WHERE n.name = ? AND o.build_id IN (SELECT value FROM json_each(?)) "
            "ORDER BY o.build_id, l.ordinal, l.pos", (name, json.dumps(build_ids)))
        out: dict[int, HotPlacement] = {}
        for bid, *rest in rows:
            if bid not in out:
                out[bid] = self._placement(name, tuple(rest), f"neighbours of {name} (build {bid})")
        return out

    @staticmethod
    def _build_filters(toolchain: str | None, tree: str | None, target: str | None) -> tuple[str, list]:
        """SQL conditions on ``builds b`` (and their arguments) keeping one toolchain, tree or target."""
        where, args = "", []
        for cond, val in ((" AND b.toolchain_id IN (SELECT id FROM toolchains WHERE name = ?)", toolchain),
                          (" AND b.commit_id IN (SELECT c.id FROM commits c JOIN trees t ON t.id = c.tree_id "
                           "WHERE t.name = ?)", tree),
                          (" AND b.target = ?", target)):
            if val:
                where += cond
                args.append(val)
        return where, args

    def _history_rows(self, name: str, toolchain: str | None, tree: str | None, target: str | None) -> list[tuple]:
        """Every stored build holding the function as (build id, commit id, toolchain id, target, status,
        size, declared, out_of_line, inlined_count).

        ``size`` sums the function's text symbols and its clones (``name.part.0``, ``name.cold``,
        ``name.constprop.0``...): what the source function costs. A plain name is one index range of
        function_sizes (0009, kept by triggers: 0010); a name with a dot (one clone) is summed from the
        symbols. CROSS JOIN keeps function_sizes the outer loop: with ANALYZE statistics sqlite otherwise
        walks every build and probes function_sizes per build (8,000 probes: 25 ms instead of 7).
        """
        conn = self._conn()
        where, args = self._build_filters(toolchain, tree, target)
        head = "SELECT b.id, b.commit_id, b.toolchain_id, b.target, b.status"
        if "." in name:
            return self._clone_history_rows(conn, name, f"{head} FROM builds b "
                                            f"WHERE b.id IN (SELECT value FROM json_each(?)){where}", args)
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        return conn.execute(f"{head}, p.size, p.declared, p.out_of_line, p.inlined_count FROM function_sizes p "
                            f"CROSS JOIN builds b ON b.id = p.build_id WHERE p.name_id = ?{where}",
                            [nid[0], *args]).fetchall() if nid else []

    def _history_columns(self, name: str, toolchain: str | None, tree: str | None,
                         target: str | None) -> list[tuple]:
        """The same as (toolchain id, target, build ids, commit ids, statuses, sizes, declared, out_of_line,
        inlined_count): one tuple of parallel lists per toolchain id and target.

        For a plain name sqlite gathers each of those lists into a JSON array: the sqlite3 module turns
        every row into Python objects and releases the GIL per row, so 8,000 rows cost ~12 ms alone and,
        beside a busy request thread, wait up to the 5 ms switch interval each; 8 rows of JSON decode in C.
        """
        if "." in name:
            lines: dict[tuple, list[tuple]] = {}
            for r in self._history_rows(name, toolchain, tree, target):
                lines.setdefault((r[2], r[3]), []).append(r)
            return [(tcid, tgt, *(list(col) for i, col in enumerate(zip(*rows)) if i not in (2, 3)))
                    for (tcid, tgt), rows in lines.items()]
        conn = self._conn()
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        if nid is None:
            return []
        where, args = self._build_filters(toolchain, tree, target)
        cols = ("b.id", "b.commit_id", "b.status", "p.size", "p.declared", "p.out_of_line", "p.inlined_count")
        rows = conn.execute(f"SELECT b.toolchain_id, b.target, {', '.join(f'json_group_array({c})' for c in cols)} "
                            f"FROM function_sizes p CROSS JOIN builds b ON b.id = p.build_id "
                            f"WHERE p.name_id = ?{where} GROUP BY b.toolchain_id, b.target", [nid[0], *args]).fetchall()
        return [(tcid, tgt, *map(json.loads, arrays)) for tcid, tgt, *arrays in rows]

    def _commits_by_id(self, ids: set[int]) -> dict[int, Commit]:
        rows = self._conn().execute(
            "SELECT c.sha, c.parent_sha, c.subject, c.author, c.date, t.name, c.id, c.generation FROM commits c "
            "JOIN trees t ON t.id = c.tree_id WHERE c.id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(i for i in ids if type(i) is int)),))   # text in a commit_id points nowhere
        return {c.id: c for c in (Commit(*r) for r in rows)}

    def _flavours(self, build_ids) -> dict[int, tuple[str, str]]:
        """(arch, LTO mode) by build id (``toolchains.flavour``): a history line per toolchain, arch and LTO
        mode, never an arm64 point on an x86_64 line."""
        return {b: (arch, lto_of_key(key)) for b, arch, key in self._conn().execute(
            "SELECT b.id, cf.arch, cf.key FROM builds b JOIN configs cf ON cf.id = b.config_id "
            "WHERE b.id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(set(build_ids))),))}

    def _toolchain_names(self) -> dict[int, tuple[str, str]]:
        """(name, version) by id: history rows carry the id, 8,000 copies of the strings cost more than the query."""
        return {i: (n, v) for i, n, v in self._conn().execute("SELECT id, name, version FROM toolchains")}

    @staticmethod
    def _clone_history_rows(conn: sqlite3.Connection, name: str, builds_q: str, args: list) -> list[tuple]:
        ids = [i for (i,) in conn.execute("SELECT id FROM names WHERE name = ? OR (name > ? AND name < ?)",
                                          (name, name + ".", name + "/"))]
        if not ids:
            return []
        exact = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        # index-only reads merged here: LEFT JOINs of aggregates make sqlite rescan per build
        sizes = {b: summed(n, f"symbols of build {b}") for b, n in conn.execute(
            f"SELECT o.build_id, sum(s.size) FROM symbols s JOIN objects o ON o.id = s.object_id "
            f"WHERE s.name_id IN ({','.join('?' * len(ids))}) AND s.letter IN ('t','T','w','W') GROUP BY o.build_id",
            ids)}
        facts = {bid: (decl, ool, ic) for bid, decl, ool, ic in conn.execute(
            "SELECT o.build_id, f.declared, f.out_of_line, f.inlined_count FROM functions f "
            "JOIN objects o ON o.id = f.object_id WHERE f.name_id = ?", (exact[0] if exact else -1,))}
        wanted = sorted(sizes.keys() | facts.keys())
        none = (None, None, None)
        return [(*r, sizes.get(r[0]), *facts.get(r[0], none))
                for r in conn.execute(builds_q, [json.dumps(wanted), *args])] if wanted else []

    @staticmethod
    def _placed(rows: list, commits: dict | None, tcs: dict, commit_at: int | None, toolchain_at: int) -> list:
        """The rows whose commit and toolchain exist: a build whose key points nowhere (a damaged
        ``commit_id``/``toolchain_id``, which ``db check`` reports) is left out, noted as damage."""
        kept = [r for r in rows if (commit_at is None or r[commit_at] in commits) and r[toolchain_at] in tcs]
        if len(kept) != len(rows):
            note_damage("builds whose commit or toolchain is missing")
        return kept

    @staticmethod
    def _history_order(c: Commit) -> tuple:
        return (c.generation or 0, c.date, c.id)

    @_retry_busy
    def function_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                         target: str | None = None) -> list[HistoryPoint]:
        """Ordered by commit (generation, then date), then toolchain name and build id."""
        rows = self._history_rows(name, toolchain, tree, target)
        commits, tcs = self._commits_by_id({r[1] for r in rows}), self._toolchain_names()
        rows = self._placed(rows, commits, tcs, 1, 2)
        rows.sort(key=lambda r: (self._history_order(commits[r[1]]), tcs[r[2]][0], r[0]))
        out = []
        flavours = self._flavours(r[0] for r in rows)
        for bid, cid, tcid, tgt, st, size, decl, ool, ic in rows:
            c = commits[cid]
            what = f"size of {name} (build {bid})"
            size, ool, ic = number(size, what, None), number(ool, what, None), number(ic, what, None)
            out.append(HistoryPoint(c.sha, c.subject, c.date, *tcs[tcid], tgt, bid, st, size, decl,
                                    None if ool is None else bool(ool), ic, *flavours.get(bid, ("x86_64", ""))))
        return out

    @_retry_busy
    def function_series(self, name: str, toolchain: str | None = None, tree: str | None = None,
                        target: str | None = None) -> FunctionSeries:
        found = self._history_columns(name, toolchain, tree, target)
        commits = self._commits_by_id(set().union(*(f[3] for f in found)))
        tcs = self._toolchain_names()
        order = sorted(commits.values(), key=self._history_order)
        pos = {c.id: i for i, c in enumerate(order)}
        n = len(order)
        lines: dict[tuple[str, str, str, str], FunctionLine] = {}
        found = self._placed(found, None, tcs, None, 0)
        flavours = self._flavours(b for f in found for b in f[2] if type(b) is int)
        for tcid, tgt, bids, cids, sts, sizes, decls, ools, ics in found:
            what = f"sizes of {name} ({tcs[tcid][0]}, {tgt})"
            sizes, ools, ics = (numbers(v, what, None) for v in (sizes, ools, ics))
            for bid, cid, st, size, decl, ool, ic in zip(bids, cids, sts, sizes, decls, ools, ics):
                # several versions of one toolchain name: one line; another arch or LTO mode: another
                key = (tcs[tcid][0], tgt, *flavours.get(bid, ("x86_64", "")))
                line = lines.get(key)
                if line is None:
                    line = lines[key] = FunctionLine(key[0], tgt, *([None] * n for _ in range(6)), arch=key[2],
                                                     lto=key[3])
                have = line.build_id
                i = pos.get(cid)
                if i is None:
                    note_damage(f"builds of {name} whose commit is missing")
                    continue
                if have[i] is not None and have[i] > bid:
                    continue                    # a commit's latest build of the line wins
                have[i], line.status[i], line.size[i], line.declared[i] = bid, st, size, decl
                line.out_of_line[i], line.inlined_count[i] = None if ool is None else bool(ool), ic
        return FunctionSeries(name, order, [ln for ln in lines.values() if any(b is not None for b in ln.build_id)])

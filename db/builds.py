"""The store's writing a build whole (objects, symbols, facts, inline cost, runtime, findings) and reading one build's parts back (part of ``db.store.SqliteStore``, split out by what it keeps).

Writing a build whole (objects, symbols, facts, inline cost, runtime, findings) and reading one build's parts back. A mixin: it only uses ``self._conn()``/``self._tx()`` and the other parts' methods,
so ``SqliteStore`` and ``PgStore`` answer every one of them alike."""
from __future__ import annotations

import json
import sqlite3
from typing import Iterable

from analyzer import finding_details
from analyzer.likely_path_cost import FunctionCost
from analyzer.link_layout import HotPlacement, Move, Neighbour
from analyzer.errors import InputError
from analyzer.inline_cost import CallerCost, FileCost, Unattributed
from analyzer.runtime import Runtime
from db.sqlite import s64, u64
from db.sqlite import compress, decompress, loads, note_damage, number, retry_busy as _retry_busy, unreadable
from db.errors import StoreError
from db.models import (Build, BuildRecord, Commit, build_complete, FindingRow, FunctionRow, InlineCalleeRow, InlineCostRecord, ObjectRecord, RemarkRow, SymbolRow)

from db.rows import _BUILD_SELECT, _build, _now


MAX_BUNDLE = 64 * 1024 * 1024       # bytes of one git bundle (0018's CHECK says the same)


def _finding_row(kind: str, function: str, severity: str, message: str, doc: str | None, base_build_id: int | None,
                 what: str) -> FindingRow:
    """A stored finding with its details read as its kind's class once; data or details of the wrong
    shape are damage: noted (the page says so) and read as the kind's empty details."""
    data = loads(doc, what)
    if not isinstance(data, dict):        # JSON, but not a finding's object
        note_damage(what)
        data = {}
    raw = data.get("details")
    try:
        details = finding_details.read(kind, raw)
    except finding_details.BadDetails as e:
        note_damage(f"details of a {what.removeprefix('data of a ')}: {e}")
        details = finding_details.empty(kind)
    return FindingRow(kind, function, severity, message, data, base_build_id, details)


class BuildRows:
    # --- writes ---------------------------------------------------------------------------------
    def ensure_tree(self, name: str, path: str = "", url: str = "") -> int:
        with self._tx() as conn:
            return self._tree_id(conn, name, path, url)

    def record_bundle(self, tree: str, sha: str, base_sha: str, data: bytes) -> None:
        if len(data) > MAX_BUNDLE:
            raise StoreError(f"the bundle of {sha[:12]} is {len(data)} bytes, over the {MAX_BUNDLE} a store keeps")
        with self._tx() as conn:
            conn.execute("INSERT OR IGNORE INTO git_bundles(tree_id, sha, base_sha, size, bundle, created_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (self._tree_id(conn, tree), sha, base_sha, len(data), data, _now()))

    @_retry_busy
    def bundle_for(self, tree: str, sha: str) -> bytes | None:
        row = self._conn().execute("SELECT g.bundle FROM git_bundles g JOIN trees t ON t.id = g.tree_id "
                                   "WHERE t.name = ? AND g.sha = ?", (tree, sha)).fetchone()
        return None if row is None else bytes(row[0])

    def record_commits(self, tree: str, commits: Iterable[Commit]) -> None:
        with self._tx() as conn:
            tid = self._tree_id(conn, tree)
            for c in commits:
                self._commit_id(conn, tid, c)

    def record_build(self, rec: BuildRecord, replace: bool = True) -> int:
        with self._tx() as conn:
            tid = self._tree_id(conn, rec.tree, rec.tree_path)
            cid = self._commit_id(conn, tid, rec.commit)
            conn.execute("INSERT OR IGNORE INTO toolchains(name, version, family) VALUES (?, ?, ?)",
                         (rec.toolchain, rec.toolchain_version, rec.toolchain_family))
            tcid = conn.execute("SELECT id FROM toolchains WHERE name = ? AND version = ?",
                                (rec.toolchain, rec.toolchain_version)).fetchone()[0]
            cf = rec.config
            conn.execute("INSERT OR IGNORE INTO configs(key, arch, base, fragment, config_hash, config_z) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (cf.key, cf.arch, cf.base, cf.fragment, cf.config_hash,
                                                       compress(cf.config_text)))
            if cf.config_text is not None:
                conn.execute("UPDATE configs SET config_z = ? WHERE key = ? AND config_hash = ? AND config_z IS NULL",
                             (compress(cf.config_text), cf.key, cf.config_hash))
            cfid = conn.execute("SELECT id FROM configs WHERE key = ? AND config_hash = ?",
                                (cf.key, cf.config_hash)).fetchone()[0]
            if not replace:
                have = conn.execute("SELECT id, status, analysis_version FROM builds WHERE commit_id = ? AND "
                                    "toolchain_id = ? AND config_id = ? AND target = ? ORDER BY id DESC LIMIT 1",
                                    (cid, tcid, cfid, rec.target)).fetchone()
                if have is not None and build_complete(
                        have[1], have[2], rec.analysis_version,
                        rec.runtime is None or have[1] != "ok" or conn.execute(
                            "SELECT 1 FROM runtimes WHERE build_id = ?", (have[0],)).fetchone() is not None):
                    return have[0]         # (a measurement the stored build lacks replaces it)
            conn.execute("DELETE FROM builds WHERE commit_id = ? AND toolchain_id = ? AND config_id = ? AND target = ?",
                         (cid, tcid, cfid, rec.target))
            bid = conn.execute(
                "INSERT INTO builds(commit_id, toolchain_id, config_id, target, status, method, seconds, started_at, "
                "log_z, errors, analysis_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, tcid, cfid, rec.target, rec.status, rec.method, rec.seconds, rec.started_at or _now(),
                 compress(rec.log), json.dumps(rec.errors), rec.analysis_version)).lastrowid
            for obj in rec.objects:
                self._insert_object(conn, bid, obj)
            self._insert_findings(conn, bid, rec.findings)
            if rec.runtime is not None:
                self._insert_runtime(conn, bid, rec.runtime)
            self._write_matrix(conn, cid, rec.commit.sha, rec.tree)
            return bid

    def record_runtime(self, build_id: int, runtime: Runtime) -> None:
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM builds WHERE id = ?", (build_id,)).fetchone() is None:
                raise StoreError(f"no build {build_id} in the store to record a measurement for")
            self._insert_runtime(conn, build_id, runtime)

    def _insert_runtime(self, conn: sqlite3.Connection, build_id: int, rt: Runtime) -> None:
        """The measurement's row and its functions' rows (0016), replacing the build's earlier ones."""
        conn.execute("DELETE FROM runtime_functions WHERE build_id = ?", (build_id,))
        conn.execute("DELETE FROM runtimes WHERE build_id = ?", (build_id,))
        conn.execute("INSERT INTO runtimes(build_id, status, message, pairs, emulator, seconds, measured_at, data) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (build_id, rt.status, rt.message, rt.pairs, rt.emulator, rt.seconds, _now(),
                      json.dumps(rt.to_dict(), separators=(",", ":"))))
        ids = self._name_ids(conn, [n for o in rt.orders for n in o.functions])
        conn.executemany("INSERT INTO runtime_functions(build_id, page_order, name_id, unit, instructions, calls, "
                         "lines) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(build_id, o.order, ids[f.name], int(f.unit), f.instructions, f.calls, f.lines)
                          for o in rt.orders for f in o.functions.values()])

    def _insert_object(self, conn: sqlite3.Connection, build_id: int, obj: ObjectRecord) -> None:
        oid = conn.execute("INSERT INTO objects(build_id, path, sha256, text, data, bss, sections, facts_z) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (build_id, obj.path, obj.sha256, obj.text, obj.data, obj.bss, json.dumps(obj.sections),
                            compress(json.dumps(obj.facts)) if obj.facts is not None else None)).lastrowid
        ids = self._name_ids(conn, [s.name for s in obj.symbols] + [s.section for s in obj.symbols]
                             + [f.name for f in obj.functions] + [c.function for c in obj.likely_paths]
                             + [p.name for p in obj.link_layout]
                             + [r.callee for r in obj.remarks] + [r.caller for r in obj.remarks])
        conn.executemany("INSERT INTO symbols(object_id, name_id, size, letter, section_id, offset) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids[s.name], s.size, s.letter, ids.get(s.section) if s.section else None,
                           s64(s.offset)) for s in obj.symbols])
        # one row per name, the last one given (what INSERT OR REPLACE kept; plain INSERTs run on both dialects)
        functions = list({f.name: f for f in obj.functions}.values())
        conn.executemany("INSERT INTO functions(object_id, name_id, size, declared, out_of_line, "
                         "inlined_count, inlined_bytes, callers, facts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, ids[f.name], f.size, f.declared, int(f.out_of_line), f.inlined_count,
                           f.inlined_bytes, f.callers, json.dumps(f.facts)) for f in functions])
        conn.executemany("INSERT INTO remarks(object_id, callee_id, caller_id, passed, reason, location) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids.get(r.callee) if r.callee else None, ids.get(r.caller) if r.caller else None,
                           int(r.passed), r.reason, r.location) for r in obj.remarks])
        likely = list({c.function: c for c in obj.likely_paths}.values())
        conn.executemany("INSERT INTO likely_paths(object_id, name_id, insns, bytes, branches, calls, "
                         "pushes, frame, memory, lines, end_kind, cycles, rthroughput, mcpu) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, ids[c.function], c.insns, c.bytes, c.branches, json.dumps(list(c.calls)), c.pushes,
                           c.frame, c.memory, c.lines, c.end, c.cycles, c.rthroughput, c.mcpu)
                          for c in likely])
        conn.executemany("INSERT INTO link_layouts(object_id, pos, name_id, ordinal, section, address, size, blocks, "
                         "lines, phase, pad_before, pad_after, neighbours) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, i, ids[p.name], p.ordinal, p.section, s64(p.address), p.size, p.blocks, p.lines,
                           p.phase, p.pad_before, p.pad_after,
                           json.dumps({"prev": p.prev.to_dict() if p.prev else None,
                                       "next": p.next.to_dict() if p.next else None}))
                          for i, p in enumerate(obj.link_layout)])
        if obj.inline_cost is not None:
            self._insert_inline_cost(conn, oid, obj.inline_cost)

    def _insert_inline_cost(self, conn: sqlite3.Connection, oid: int, ic: InlineCostRecord) -> None:
        """An object's inline cost (0014), in the transaction writing its build."""
        ids = self._name_ids(conn, [c.name for c in ic.callees] + [c.decl_file for c in ic.callees]
                             + [s for c in ic.callees for s in c.callers] + [c.symbol for c in ic.callers]
                             + [f.file for f in ic.files])
        u = ic.unattributed
        conn.execute("INSERT INTO inline_costs(object_id, units, scope, inlined_bytes, outside_symbols, "
                     "no_origin_name, empty_instances, undescribed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (oid, ic.units, json.dumps(list(ic.scope)) if ic.scope else "", ic.inlined_bytes,
                      u.outside_symbols, u.no_origin_name, u.empty_instances, u.undescribed))
        conn.executemany("INSERT INTO inline_callees(object_id, pos, name_id, decl_file_id, instances, bytes, "
                         "including, empty, callers, units) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, i, ids[c.name], ids.get(c.decl_file) if c.decl_file else None, c.instances,
                           c.bytes, c.including, c.empty, len(c.callers), c.units) for i, c in enumerate(ic.callees)])
        conn.executemany("INSERT INTO inline_callee_callers(object_id, pos, caller_id, bytes) VALUES (?, ?, ?, ?)",
                         [(oid, i, ids[s], n) for i, c in enumerate(ic.callees) for s, n in c.callers.items()])
        conn.executemany("INSERT INTO inline_callers(object_id, name_id, size, inlined, own, undescribed) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids[c.symbol], c.size, c.inlined, c.own, c.undescribed) for c in ic.callers])
        conn.executemany("INSERT INTO inline_files(object_id, file_id, callees, instances, bytes) "
                         "VALUES (?, ?, ?, ?, ?)",
                         [(oid, ids[f.file], f.callees, f.instances, f.bytes) for f in ic.files])

    @staticmethod
    def _insert_findings(conn: sqlite3.Connection, build_id: int, findings: list[FindingRow],
                         base_build_id: int | None = None) -> None:
        conn.executemany("INSERT INTO findings(build_id, base_build_id, kind, function, severity, message, data) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(build_id, base_build_id if base_build_id is not None else f.base_build_id, f.kind,
                           f.function, f.severity, f.message, json.dumps(f.data)) for f in findings])

    # --- reads ----------------------------------------------------------------------------------
    @_retry_busy
    def get_commit(self, rev: str, tree: str | None = None) -> Commit | None:
        rev = rev.strip().lower()
        if len(rev) < 4 or any(ch not in "0123456789abcdef" for ch in rev):
            return None
        q = ("SELECT c.sha, c.parent_sha, c.subject, c.author, c.date, t.name, c.id, c.generation FROM commits c "
             "JOIN trees t ON t.id = c.tree_id WHERE c.sha >= ? AND c.sha < ?")
        args: list = [rev, rev + "g"]
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        rows = self._conn().execute(q + " LIMIT 2", args).fetchall()
        if len(rows) > 1 and not any(r[0] == rev for r in rows):
            raise StoreError(f"commit {rev!r} is ambiguous in the store")
        row = next((r for r in rows if r[0] == rev), rows[0] if rows else None)
        return Commit(*row) if row else None

    @_retry_busy
    def find_build(self, tree: str, sha: str, toolchain: str, config_key: str, target: str,
                   toolchain_version: str | None = None) -> Build | None:
        q = _BUILD_SELECT + " WHERE t.name = ? AND c.sha = ? AND tc.name = ? AND cf.key = ? AND b.target = ?"
        args = [tree, sha, toolchain, config_key, target]
        if toolchain_version is not None:
            q += " AND tc.version = ?"
            args.append(toolchain_version)
        row = self._conn().execute(q + " ORDER BY b.id DESC LIMIT 1", args).fetchone()
        return _build(row) if row else None

    @_retry_busy
    def get_build(self, build_id: int) -> Build | None:
        row = self._conn().execute(_BUILD_SELECT + " WHERE b.id = ?", (build_id,)).fetchone()
        return _build(row) if row else None

    @_retry_busy
    def builds_for_commit(self, sha: str, tree: str | None = None) -> list[Build]:
        q = _BUILD_SELECT + " WHERE c.sha = ?"
        args = [sha]
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        return [_build(r) for r in self._conn().execute(q + " ORDER BY tc.name, b.target, b.id", args)]

    @_retry_busy
    def build_log(self, build_id: int) -> str:
        row = self._conn().execute("SELECT log_z FROM builds WHERE id = ?", (build_id,)).fetchone()
        return decompress(row[0], f"log of build {build_id}") if row else ""

    @_retry_busy
    def objects_for(self, build_id: int) -> list[ObjectRecord]:
        rows = self._conn().execute("SELECT path, sha256, text, data, bss, sections, id FROM objects "
                                    "WHERE build_id = ? ORDER BY path", (build_id,))
        return [ObjectRecord(p, h, *(number(v, f"sizes of object {i}") for v in (t, d, b)),
                             loads(s, f"sections of object {i}"), id=i) for p, h, t, d, b, s, i in rows]

    @_retry_busy
    def object_facts(self, build_id: int) -> dict[str, dict]:
        rows = self._conn().execute("SELECT path, facts_z FROM objects WHERE build_id = ? AND facts_z IS NOT NULL "
                                    "ORDER BY path", (build_id,))
        return {p: loads(decompress(z, f"facts of {p} (build {build_id})"), f"facts of {p} (build {build_id})")
                for p, z in rows}

    @_retry_busy
    def likely_paths_for(self, build_id: int) -> dict[str, list[FunctionCost]]:
        """Per object path, the stored likely paths of its hot functions (in function order)."""
        rows = self._conn().execute(
            "SELECT o.path, n.name, l.insns, l.bytes, l.branches, l.calls, l.pushes, l.frame, l.memory, l.lines, "
            "l.end_kind, l.cycles, l.rthroughput, l.mcpu FROM objects o JOIN likely_paths l ON l.object_id = o.id "
            "JOIN names n ON n.id = l.name_id WHERE o.build_id = ? ORDER BY o.path, n.name", (build_id,))
        out: dict[str, list[FunctionCost]] = {}
        for path, name, ins, by, br, calls, pu, fr, me, li, end, cy, rt, mc in rows:
            what = f"likely path of {name} (build {build_id})"
            ins, by, br, pu, fr, me, li = (number(v, what) for v in (ins, by, br, pu, fr, me, li))
            cy, rt = number(cy, what, None), number(rt, what, None)
            out.setdefault(path, []).append(FunctionCost(name, ins, by, br,
                                                         tuple(loads(calls, f"likely path calls of {name} (build {build_id})", list)), pu, fr, me,
                                                         li, end, cy, rt, mc))
        return out

    @_retry_busy
    def inline_costs_for(self, build_id: int) -> list[InlineCostRecord]:
        conn = self._conn()
        heads = conn.execute(
            "SELECT o.id, o.path, i.units, i.scope, i.inlined_bytes, i.outside_symbols, i.no_origin_name, "
            "i.empty_instances, i.undescribed FROM objects o JOIN inline_costs i ON i.object_id = o.id "
            "WHERE o.build_id = ? ORDER BY o.path", (build_id,)).fetchall()
        out = []
        for oid, path, units, scope, inlined, outside, noname, empty, undescribed in heads:
            what = f"inline cost of {path} (build {build_id})"
            units, inlined, outside, noname, empty, undescribed = (
                number(v, what) for v in (units, inlined, outside, noname, empty, undescribed))
            callees: dict[int, InlineCalleeRow] = {}
            for pos, name, decl, inst, by, incl, em, un in conn.execute(
                    "SELECT c.pos, n.name, d.name, c.instances, c.bytes, c.including, c.empty, c.units "
                    "FROM inline_callees c JOIN names n ON n.id = c.name_id LEFT JOIN names d ON d.id = c.decl_file_id "
                    "WHERE c.object_id = ? ORDER BY c.pos", (oid,)):
                callees[pos] = InlineCalleeRow(name, decl, *(number(v, what) for v in (inst, by, incl, em, un)))
            for pos, caller, by in conn.execute(
                    "SELECT p.pos, n.name, p.bytes FROM inline_callee_callers p JOIN names n ON n.id = p.caller_id "
                    "WHERE p.object_id = ? ORDER BY p.pos, p.bytes DESC, n.name", (oid,)):
                if pos in callees:
                    callees[pos].callers[caller] = number(by, what)
            callers = [CallerCost(r[0], *(number(v, what) for v in r[1:])) for r in conn.execute(
                "SELECT n.name, c.size, c.inlined, c.own, c.undescribed FROM inline_callers c "
                "JOIN names n ON n.id = c.name_id WHERE c.object_id = ? ORDER BY n.name", (oid,))]
            files = [FileCost(r[0], *(number(v, what) for v in r[1:])) for r in conn.execute(
                "SELECT n.name, f.callees, f.instances, f.bytes FROM inline_files f JOIN names n ON n.id = f.file_id "
                "WHERE f.object_id = ? ORDER BY n.name", (oid,))]
            out.append(InlineCostRecord(path, units, list(callees.values()), callers, files,
                                        Unattributed(outside, noname, empty, undescribed), inlined,
                                        tuple(loads(scope, f"scope of the {what}", list)) if scope else ()))
        return out

    @_retry_busy
    def runtime_for(self, build_id: int) -> Runtime | None:
        row = self._conn().execute("SELECT data FROM runtimes WHERE build_id = ?", (build_id,)).fetchone()
        if row is None:
            return None
        try:
            return Runtime.from_dict(json.loads(row[0]))
        except (ValueError, TypeError, InputError):
            return Runtime("failed", unreadable(f"runtime measurement of build {build_id}"))

    @_retry_busy
    def symbols_for(self, build_id: int) -> list[SymbolRow]:
        rows = self._conn().execute(
            "SELECT n.name, s.size, s.letter, sn.name, s.\"offset\" FROM objects o "
            "JOIN symbols s ON s.object_id = o.id JOIN names n ON n.id = s.name_id "
            "LEFT JOIN names sn ON sn.id = s.section_id WHERE o.build_id = ?", (build_id,))
        what = f"symbols of build {build_id}"
        return [SymbolRow(n, z if type(z) is int else number(z, what), le, sec,
                          u64(off if type(off) is int else number(off, what))) for n, z, le, sec, off in rows]

    @staticmethod
    def _placement(name: str, row: tuple, what: str) -> HotPlacement:
        ordinal, section, address, size, blocks, lines, phase, pad_before, pad_after, nb = row
        ordinal, address, size, blocks, lines, pad_before, pad_after = (
            number(v, f"link layout of {name}") for v in (ordinal, address, size, blocks, lines, pad_before, pad_after))
        nb = loads(nb, what)
        near = {k: Neighbour(str(v.get("name", "")), int(v.get("address", 0)), int(v.get("size", 0)))
                if isinstance(v, dict) else None for k, v in ((k, nb.get(k)) for k in ("prev", "next"))}
        return HotPlacement(name, ordinal, section, u64(address), size, blocks, lines, phase, pad_before, pad_after,
                            near["prev"], near["next"])

    @_retry_busy
    def link_layout_for(self, build_id: int) -> dict[str, list[HotPlacement]]:
        rows = self._conn().execute(
            f"SELECT o.path, n.name, {self._PLACEMENT} FROM objects o JOIN link_layouts l ON l.object_id = o.id "
            "JOIN names n ON n.id = l.name_id WHERE o.build_id = ? ORDER BY o.path, l.pos", (build_id,))
        out: dict[str, list[HotPlacement]] = {}
        for path, name, *rest in rows:
            out.setdefault(path, []).append(self._placement(name, tuple(rest), f"neighbours of {name} (build {build_id})"))
        return out

    @_retry_busy
    def text_symbols(self, build_ids: list[int], path: str, sections: list[str]
                     ) -> dict[int, list[tuple[str, str, int, int]]]:
        # the symbols by name id, then each distinct name once for all the builds (a vmlinux pair shares
        # nearly all of its ~50k text symbols): a third of the time of joining names per row
        conn = self._conn()
        secs = dict(conn.execute("SELECT id, name FROM names WHERE name IN (SELECT value FROM json_each(?))",
                                 (json.dumps(sections),)))
        got = {b: conn.execute(
            "SELECT s.name_id, s.section_id, s.\"offset\", s.size FROM objects o JOIN symbols s ON s.object_id = o.id "
            "WHERE o.build_id = ? AND o.path = ? AND s.section_id IN (SELECT value FROM json_each(?))",
            (b, path, json.dumps(sorted(secs)))).fetchall() for b in build_ids}
        ids = sorted({r[0] for rows in got.values() for r in rows})
        names = dict(conn.execute("SELECT id, name FROM names WHERE id IN (SELECT value FROM json_each(?))",
                                  (json.dumps(ids),)))
        what = f"symbols of {path}"
        return {b: [(names[n], secs[sec], u64(a if type(a) is int else number(a, what)),
                     z if type(z) is int else number(z, what)) for n, sec, a, z in rows] for b, rows in got.items()}

    @_retry_busy
    def link_moves_for(self, build_id: int, base_build_id: int) -> list[Move] | None:
        rows = self._conn().execute("SELECT data FROM link_moves WHERE build_id = ? AND base_build_id = ? ORDER BY pos",
                                    (build_id, base_build_id)).fetchall()
        if not rows:
            return None
        out = []
        for (data,) in rows:
            d = loads(data, f"link moves of build {build_id} vs {base_build_id}")
            try:
                out.append(Move.from_dict(d))
            except (KeyError, TypeError, ValueError):
                continue            # a damaged row (loads noted it): the others are still shown
        return out

    @_retry_busy
    def functions_for(self, build_id: int) -> list[FunctionRow]:
        rows = self._conn().execute(
            "SELECT n.name, f.size, f.declared, f.out_of_line, f.inlined_count, f.inlined_bytes, f.callers, f.facts "
            "FROM objects o JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id "
            "WHERE o.build_id = ? ORDER BY n.name", (build_id,))
        return [FunctionRow(n, *self._function_numbers(n, build_id, s, d, oo, ic, ib, ca),
                            loads(fa, f"facts of function {n} (build {build_id})"))
                for n, s, d, oo, ic, ib, ca, fa in rows]

    @staticmethod
    def _function_numbers(n: str, build_id: int, s, d, oo, ic, ib, ca) -> tuple:
        what = f"facts of function {n} (build {build_id})"
        s, oo, ic, ib, ca = (number(v, what) for v in (s, oo, ic, ib, ca))
        return s, d, bool(oo), ic, ib, ca

    @_retry_busy
    def remarks_for(self, build_id: int, passed: bool | None = None) -> list[RemarkRow]:
        q = ("SELECT ce.name, cr.name, r.passed, r.reason, r.location FROM objects o "
             "JOIN remarks r ON r.object_id = o.id LEFT JOIN names ce ON ce.id = r.callee_id "
             "LEFT JOIN names cr ON cr.id = r.caller_id WHERE o.build_id = ?")
        args: list = [build_id]
        if passed is not None:
            q += " AND r.passed = ?"
            args.append(int(passed))
        return [RemarkRow(a, b, bool(p), r, loc) for a, b, p, r, loc in self._conn().execute(q, args)]

    @_retry_busy
    def findings_for(self, build_id: int, base_build_id: int | None = None) -> list[FindingRow]:
        rows = self._conn().execute(
            "SELECT kind, function, severity, message, data, base_build_id FROM findings WHERE build_id = ? "
            "AND (base_build_id IS NULL OR base_build_id = ?) ORDER BY id", (build_id, base_build_id))
        return [_finding_row(k, f, s, m, d, b, f"data of a {k} finding (build {build_id})") for k, f, s, m, d, b in rows]

-- version 14: where inlined code lands (analyzer.inline_cost, issue 14), per object of a build:
-- every inlined callee (the abstract origin) with its instances and bytes, which caller symbols
-- its bytes sit in, the declaring files' totals, the caller symbols' split into inlined, own and
-- undescribed bytes, and what could not be attributed. Written with the build row in
-- Store.record_build's transaction (the build row's change-counter triggers of 0012 cover these
-- rows, as they cover objects and symbols: no trigger here). Builds analyzed before have no rows;
-- the pipeline analyzes them again from their cached objects (analysis version 5).
-- Portable SQL only (PG-CONVENTION: plain tables and indexes; the store writes upserts, never
-- INSERT OR REPLACE, into them).

CREATE TABLE inline_costs (
    object_id        INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    units            INTEGER NOT NULL,          -- compilation units read
    scope            TEXT NOT NULL DEFAULT '',  -- '' : the whole file; else the units read (JSON list)
    inlined_bytes    INTEGER NOT NULL,          -- each byte once, in its innermost callee, inside caller symbols
    outside_symbols  INTEGER NOT NULL,          -- not attributed: instance bytes in no function symbol
    no_origin_name   INTEGER NOT NULL,          -- ... bytes of instances whose origin has no name
    empty_instances  INTEGER NOT NULL,          -- ... instances without a code range (0 bytes)
    undescribed      INTEGER NOT NULL,          -- ... caller symbols' bytes no DWARF range covers
    PRIMARY KEY (object_id)
);

CREATE TABLE inline_callees (
    object_id     INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    pos           INTEGER NOT NULL,             -- the callee's number within the object
    name_id       INTEGER NOT NULL REFERENCES names(id),
    decl_file_id  INTEGER REFERENCES names(id), -- DW_AT_decl_file of the origin; NULL: unknown
    instances     INTEGER NOT NULL,
    bytes         INTEGER NOT NULL,             -- innermost convention (see analyzer.inline_cost)
    including     INTEGER NOT NULL,             -- the instances' whole ranges, nested inlines included
    empty         INTEGER NOT NULL,             -- instances without a code range
    callers       INTEGER NOT NULL,             -- caller symbols its bytes sit in
    units         INTEGER NOT NULL,             -- compilation units it is inlined in
    PRIMARY KEY (object_id, pos)
);
CREATE INDEX inline_callees_name ON inline_callees(name_id, object_id);

-- (callee, caller) bytes: every caller of every callee, so a comparison finds the callers that changed
CREATE TABLE inline_callee_callers (
    object_id  INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    pos        INTEGER NOT NULL,                -- inline_callees.pos
    caller_id  INTEGER NOT NULL REFERENCES names(id),
    bytes      INTEGER NOT NULL,
    PRIMARY KEY (object_id, pos, caller_id)
);

-- caller symbols (summed per name, as bloat-o-meter sums them): size == inlined + own + undescribed
CREATE TABLE inline_callers (
    object_id    INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    name_id      INTEGER NOT NULL REFERENCES names(id),
    size         INTEGER NOT NULL,
    inlined      INTEGER NOT NULL,
    own          INTEGER NOT NULL,
    undescribed  INTEGER NOT NULL,
    PRIMARY KEY (object_id, name_id)
);

-- inlined bytes per declaring file (a header, usually); '?' : callees without DW_AT_decl_file
CREATE TABLE inline_files (
    object_id  INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    file_id    INTEGER NOT NULL REFERENCES names(id),
    callees    INTEGER NOT NULL,
    instances  INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    PRIMARY KEY (object_id, file_id)
);

-- a comparison's inline cost (ci.reports.model.InlineReport as JSON, zlib), computed once when the
-- pipeline compares two builds, as comparison_tables keeps the bloat-o-meter tables: a patch page
-- then reads one row instead of both builds' rows (~50 ms a toolchain for page_alloc.o). Written in
-- Store.record_comparison's transaction, whose upsert of the comparisons row fires 0012's
-- comparison triggers (no trigger here). A pair without one is compared from the rows per request.
CREATE TABLE comparison_inline_costs (
    build_id      INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    base_build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    report_z      BLOB NOT NULL,
    PRIMARY KEY (build_id, base_build_id)
);
CREATE INDEX comparison_inline_costs_base ON comparison_inline_costs(base_build_id);

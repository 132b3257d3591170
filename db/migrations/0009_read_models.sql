-- version 9: what the dashboard reads, computed once when it is written instead of on every request.
--
-- A comparison of a build with its base (normally the parent's build) now also keeps what every
-- page reads of it, written with its findings by Store.record_comparison. Comparisons stored by
-- an earlier version have neither: readers compute them (the same results), and the next
-- `sizewatch run` over the commit compares it again and stores them.
--
-- counts: what a dashboard cell shows of the build against that base (db.finding_counts): finding
-- counts by severity and kind, carried findings, the worst finding's id. The index and series
-- pages read ~500 builds each, one row apiece instead of every finding (~10 ms).
ALTER TABLE comparisons ADD COLUMN counts TEXT;

-- comparison_tables: the bloat-o-meter tables. A patch page used to regenerate them from ~300
-- symbol rows per build on each request (8 toolchains: 16 symbol sets, ~35 ms).
CREATE TABLE comparison_tables (
    build_id      INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    base_build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    tables_z      BLOB NOT NULL,               -- JSON (db.bloat_tables), zlib
    PRIMARY KEY (build_id, base_build_id)
);
CREATE INDEX comparison_tables_base ON comparison_tables(base_build_id);

-- function_sizes: one row per (source function, build), what a function's history reads: the
-- text symbols named NAME or NAME.<clone suffix> summed (bloat-o-meter's view of what the source
-- function costs; NULL: no symbol) and the inline facts of NAME (NULL: not analyzed). NAME is a
-- symbol name up to its first dot. The function page reads 8,000 of these rows by one index range
-- instead of aggregating symbols and facts of every build (1,000 commits x 8 toolchains: ~100 ms).
CREATE TABLE function_sizes (
    name_id       INTEGER NOT NULL REFERENCES names(id),
    build_id      INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    size          INTEGER,
    declared      TEXT,
    out_of_line   INTEGER,
    inlined_count INTEGER,
    PRIMARY KEY (name_id, build_id)
) WITHOUT ROWID;
CREATE INDEX function_sizes_build ON function_sizes(build_id);
-- (filled by 0010, which keeps it up to date from then on)

-- version 16: executed instructions of the allocator's fast path under emulation (analyzer.runtime,
-- issue 26), per measured build (a vmlinux target: commit x toolchain x config x target): one row with
-- the measurement's status and one line, and the whole Runtime as JSON (Runtime.to_dict()), which is
-- what every reader turns back into an analyzer.runtime.Runtime. Beside it, each order's functions as
-- rows: what a function's history (the function page) reads by name without decoding every build's JSON.
--
-- Both are written whole in one transaction: with their build row (Store.record_build), or alone for a
-- stored build (Store.record_runtime, which replaces the build's earlier measurement). Change counters
-- (0012): 0017's triggers on runtimes bump the build's commit; runtime_functions rows are only ever
-- written in the transaction that writes their runtimes row, so that row's trigger covers them.
-- Portable SQL only (PG-CONVENTION).

CREATE TABLE runtimes (
    build_id     INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    status       TEXT NOT NULL,                 -- ok | failed
    message      TEXT NOT NULL DEFAULT '',      -- why it failed, one line
    pairs        INTEGER NOT NULL DEFAULT 0,    -- alloc/free pairs per order
    emulator     TEXT NOT NULL DEFAULT '',
    seconds      REAL NOT NULL DEFAULT 0,
    measured_at  TEXT NOT NULL,
    data         TEXT NOT NULL,                 -- JSON analyzer.runtime.Runtime.to_dict()
    PRIMARY KEY (build_id)
);

CREATE TABLE runtime_functions (
    build_id      INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    page_order    INTEGER NOT NULL,             -- the allocation order of the loop
    name_id       INTEGER NOT NULL REFERENCES names(id),
    unit          INTEGER NOT NULL,             -- 1: the measured unit's own function (mm/page_alloc.c)
    instructions  REAL NOT NULL,                -- executed per alloc/free pair
    calls         REAL NOT NULL,                -- entries per pair
    lines         INTEGER NOT NULL,             -- 64-byte lines executed on every pair
    PRIMARY KEY (build_id, page_order, name_id)
);
CREATE INDEX runtime_functions_name ON runtime_functions(name_id, build_id);

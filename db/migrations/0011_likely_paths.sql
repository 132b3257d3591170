-- version 11: the likely path of each hot function per object (analyzer.likely_path, issue 15):
-- the static measures a patch's cost findings are computed from, and llvm-mca's estimated cycles
-- (NULL when llvm-mca was not available). Builds analyzed before have no rows here; the pipeline
-- analyzes them again from their cached objects (analysis version 4).
CREATE TABLE likely_paths (
    object_id   INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    name_id     INTEGER NOT NULL REFERENCES names(id),
    insns       INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    branches    INTEGER NOT NULL,             -- conditional branches on the path
    calls       TEXT NOT NULL DEFAULT '[]',   -- JSON list of call targets in path order
    pushes      INTEGER NOT NULL DEFAULT 0,   -- callee-saved registers pushed
    frame       INTEGER NOT NULL DEFAULT 0,   -- stack frame bytes
    memory      INTEGER NOT NULL DEFAULT 0,   -- instructions with a memory operand
    lines       INTEGER NOT NULL DEFAULT 0,   -- 64-byte lines touched
    end_kind    TEXT NOT NULL DEFAULT '',     -- ret | tail | loop | trap | cold | end
    cycles      INTEGER,                      -- llvm-mca Total Cycles, one pass (an estimate)
    rthroughput REAL,
    mcpu        TEXT,
    PRIMARY KEY (object_id, name_id)
) WITHOUT ROWID;
CREATE INDEX likely_paths_name ON likely_paths(name_id, object_id);

-- version 2: the analyzer's inline facts, the compilers' remarks and the findings.
-- Builds stored by version 1 have analysis_version 0: the pipeline analyzes them again.

ALTER TABLE builds ADD COLUMN analysis_version INTEGER NOT NULL DEFAULT 0;
-- The analyzer's whole ObjectFacts (to_dict JSON, zlib), so head-vs-base findings can be
-- computed later from the store alone, without the .o files.
ALTER TABLE objects ADD COLUMN facts_z BLOB;

-- One row per function of an object (FunctionFacts); the full fact record is kept as JSON
-- so fields the analyzer adds later survive without a migration.
CREATE TABLE functions (
    object_id     INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    name_id       INTEGER NOT NULL REFERENCES names(id),
    size          INTEGER NOT NULL DEFAULT 0,  -- out-of-line bytes (0 when only inlined)
    declared      TEXT NOT NULL DEFAULT 'unknown',  -- inline | always_inline | noinline | plain | unknown
    out_of_line   INTEGER NOT NULL DEFAULT 0,
    inlined_count INTEGER NOT NULL DEFAULT 0,
    inlined_bytes INTEGER NOT NULL DEFAULT 0,
    callers       INTEGER NOT NULL DEFAULT 0,  -- calls to the out-of-line copy
    facts         TEXT NOT NULL DEFAULT '{}',  -- FunctionFacts.to_dict() as JSON
    PRIMARY KEY (object_id, name_id)
) WITHOUT ROWID;
CREATE INDEX functions_name ON functions(name_id, object_id);

-- The compilers' own inline decisions, parsed from -fopt-info / optimization records.
CREATE TABLE remarks (
    object_id   INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    callee_id   INTEGER REFERENCES names(id),
    caller_id   INTEGER REFERENCES names(id),
    passed      INTEGER NOT NULL,              -- 1 inlined, 0 not inlined
    reason      TEXT NOT NULL DEFAULT '',
    location    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX remarks_object ON remarks(object_id, callee_id);

-- A comparison of a build with its base (normally the parent commit's build under the same
-- toolchain, config and target); its findings hang off it. Findings about one object alone
-- (always_inline copies, inline functions not inlined) have base_build_id NULL.
CREATE TABLE findings (
    id            INTEGER PRIMARY KEY,
    build_id      INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    base_build_id INTEGER REFERENCES builds(id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    function      TEXT NOT NULL DEFAULT '',
    severity      TEXT NOT NULL DEFAULT '',
    message       TEXT NOT NULL DEFAULT '',
    data          TEXT NOT NULL DEFAULT '{}'   -- Finding.to_dict() as JSON
);
CREATE INDEX findings_build ON findings(build_id, base_build_id);

CREATE TABLE comparisons (
    build_id      INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    base_build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    PRIMARY KEY (build_id, base_build_id)
) WITHOUT ROWID;

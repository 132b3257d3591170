-- version 15: hot functions at their link addresses (analyzer.link_layout, issue 13), for linked
-- targets (vmlinux): where each one sits in the build, and for a build against its parent's how far
-- it moved and why. Addresses are stored as signed 64-bit integers (two's complement, db.sqlite.s64;
-- read back unsigned): a kernel's 0xffffffff8... does not fit a signed INTEGER/BIGINT otherwise.
--
-- Change counters (0012): link_layouts rows are written with their object, in the build's transaction
-- (Store.record_build), and link_moves rows with their comparison, in the transaction that upserts the
-- comparisons row (Store.record_comparison): the builds and comparisons triggers bump the commit's
-- counter for them, as a build's symbols or a matrix table's rows. No trigger of their own.

CREATE TABLE link_layouts (
    object_id  INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    pos        INTEGER NOT NULL,               -- address order among the object's hot functions
    name_id    INTEGER NOT NULL REFERENCES names(id),
    ordinal    INTEGER NOT NULL DEFAULT 0,     -- n-th symbol of that name in its section (same-named statics)
    section    TEXT NOT NULL,
    address    INTEGER NOT NULL,               -- signed 64-bit
    size       INTEGER NOT NULL,
    blocks     INTEGER NOT NULL,               -- 16-byte blocks spanned at that address
    lines      INTEGER NOT NULL,               -- 64-byte cache lines spanned
    phase      INTEGER NOT NULL,               -- address % 64
    pad_before INTEGER,                        -- NULL: first symbol of its section
    pad_after  INTEGER,                        -- NULL: last
    neighbours TEXT NOT NULL DEFAULT '{}',     -- JSON {"prev": {name, address, size} | null, "next": ...}
    PRIMARY KEY (object_id, pos)
);
CREATE INDEX link_layouts_name ON link_layouts(name_id, object_id);

CREATE TABLE link_moves (
    build_id      INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    base_build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    pos           INTEGER NOT NULL,            -- head address order (functions only in the base last)
    name_id       INTEGER NOT NULL REFERENCES names(id),
    shift         INTEGER NOT NULL DEFAULT 0,  -- head address - base address (0: in one build only; clamped to 64 bits)
    data          TEXT NOT NULL,               -- JSON analyzer.link_layout.Move.to_dict(), causes trimmed
    PRIMARY KEY (build_id, base_build_id, pos)
);
CREATE INDEX link_moves_base ON link_moves(base_build_id);

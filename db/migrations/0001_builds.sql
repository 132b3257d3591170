-- sizewatch store, version 1: what a build produced, as bloat-o-meter sees it.
-- Names (symbols, functions, sections) are interned: a store of 1,000 commits x 8
-- toolchains holds millions of symbol rows, most of them repeating the same few
-- thousand names.

CREATE TABLE trees (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,          -- e.g. "linux-6.1"
    path        TEXT NOT NULL DEFAULT '',      -- the git tree on the machine that built it
    url         TEXT NOT NULL DEFAULT ''
);

CREATE TABLE commits (
    id          INTEGER PRIMARY KEY,
    tree_id     INTEGER NOT NULL REFERENCES trees(id),
    sha         TEXT NOT NULL,
    parent_sha  TEXT,                          -- first parent; NULL for a root commit
    subject     TEXT NOT NULL DEFAULT '',
    author      TEXT NOT NULL DEFAULT '',
    date        TEXT NOT NULL DEFAULT '',      -- committer date, ISO 8601
    UNIQUE (tree_id, sha)
);
CREATE INDEX commits_sha ON commits(sha);
CREATE INDEX commits_parent ON commits(parent_sha);

CREATE TABLE toolchains (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,                 -- registry name: gcc-12, clang-19
    version     TEXT NOT NULL,                 -- the exact --version line
    family      TEXT NOT NULL DEFAULT '',
    UNIQUE (name, version)
);

CREATE TABLE configs (
    id          INTEGER PRIMARY KEY,
    key         TEXT NOT NULL,                 -- toolchains' config key, e.g. defconfig-83bced9279
    arch        TEXT NOT NULL DEFAULT 'x86_64',
    base        TEXT NOT NULL DEFAULT '',
    fragment    TEXT NOT NULL DEFAULT '',
    config_hash TEXT NOT NULL DEFAULT '',      -- sha256 of the resulting .config
    config_z    BLOB,                          -- the .config, zlib
    UNIQUE (key, config_hash)
);

CREATE TABLE names (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE
);

CREATE TABLE builds (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,   -- never reused: pages link to build ids
    commit_id    INTEGER NOT NULL REFERENCES commits(id),
    toolchain_id INTEGER NOT NULL REFERENCES toolchains(id),
    config_id    INTEGER NOT NULL REFERENCES configs(id),
    target       TEXT NOT NULL,                -- mm/page_alloc.o, mm/, vmlinux
    status       TEXT NOT NULL,                -- ok | failed | timeout | killed
    method       TEXT NOT NULL DEFAULT '',     -- kbuild | replay | cached
    seconds      REAL NOT NULL DEFAULT 0,
    started_at   TEXT NOT NULL DEFAULT '',
    log_z        BLOB,                         -- build log, zlib
    errors       TEXT NOT NULL DEFAULT '[]',   -- JSON list of compiler error lines
    UNIQUE (commit_id, toolchain_id, config_id, target)
);
CREATE INDEX builds_toolchain ON builds(toolchain_id, commit_id);

-- One row per built object (a target may yield several: mm/ gives one per .o).
CREATE TABLE objects (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id    INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,                 -- relative to the build dir, e.g. mm/page_alloc.o
    sha256      TEXT NOT NULL DEFAULT '',
    text        INTEGER NOT NULL DEFAULT 0,    -- size(1) Berkeley figures
    data        INTEGER NOT NULL DEFAULT 0,
    bss         INTEGER NOT NULL DEFAULT 0,
    sections    TEXT NOT NULL DEFAULT '{}',    -- JSON {section: size} of every alloc section
    UNIQUE (build_id, path)
);

-- nm --size-sort, as bloat-o-meter reads it: enough to reproduce its tables without the .o.
CREATE TABLE symbols (
    object_id   INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    name_id     INTEGER NOT NULL REFERENCES names(id),
    size        INTEGER NOT NULL,
    letter      TEXT NOT NULL,                 -- nm type letter
    section_id  INTEGER REFERENCES names(id),  -- NULL for common symbols
    offset      INTEGER NOT NULL DEFAULT 0     -- st_value: section offset in a .o, address when linked
);
CREATE INDEX symbols_object ON symbols(object_id);
CREATE INDEX symbols_name ON symbols(name_id, object_id);

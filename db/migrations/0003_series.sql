-- version 3: patch series from mailing lists (mbox files), the patches in order and how they applied.

CREATE TABLE series (
    id            INTEGER PRIMARY KEY,
    tree_id       INTEGER NOT NULL REFERENCES trees(id),
    message_id    TEXT NOT NULL,               -- the cover letter's, else the first patch's
    version       INTEGER NOT NULL DEFAULT 1,  -- [PATCH vN]
    subject       TEXT NOT NULL DEFAULT '',
    author        TEXT NOT NULL DEFAULT '',
    date          TEXT NOT NULL DEFAULT '',
    cover_z       BLOB,                        -- cover letter text, zlib
    base_sha      TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL DEFAULT 'applied',   -- applied | failed (a patch did not apply)
    error         TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL DEFAULT '',
    UNIQUE (tree_id, message_id, base_sha)
);

CREATE TABLE series_patches (
    series_id     INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,            -- 1-based, the n of [PATCH n/m]
    message_id    TEXT NOT NULL DEFAULT '',
    subject       TEXT NOT NULL DEFAULT '',
    author        TEXT NOT NULL DEFAULT '',
    commit_sha    TEXT,                        -- NULL when it did not apply
    status        TEXT NOT NULL DEFAULT 'applied',   -- applied | failed | skipped
    error         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (series_id, position)
) WITHOUT ROWID;
CREATE INDEX series_patches_commit ON series_patches(commit_sha);

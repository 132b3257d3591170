-- version 18: the commits a coordinator made with git am, as git bundles, for build workers that share
-- no disk with it (issue 27). A worker building a commit its own kernel tree lacks reads the bundle of
-- (tree, sha): the commits from the tree's root commit (the same on every machine for Debian's
-- linux-source, toolchains.source) up to sha, checked and fetched into its own tree (toolchains.bundle).
-- Written by the coordinator before it enqueues the commit's jobs (ci.queue.trees), never changed after:
-- a commit sha names its content. Capped at 64 MiB (a series is a few trees and blobs).
--
-- Not part of any page: no change counters (0012). Portable SQL only (PG-CONVENTION): BLOB is BYTEA there.

CREATE TABLE git_bundles (
    tree_id     INTEGER NOT NULL REFERENCES trees(id),
    sha         TEXT NOT NULL,                  -- the commit the bundle's one head is
    base_sha    TEXT NOT NULL,                  -- its prerequisite: the tree's root commit
    size        INTEGER NOT NULL,
    bundle      BLOB NOT NULL CHECK (length(bundle) <= 67108864),
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tree_id, sha)
);

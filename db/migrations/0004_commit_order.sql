-- version 4: commits ordered along history. Dates cannot do it: git am keeps a patch's author
-- date (a 2017 patch applied in 2026 sorts before its parent). generation is the commit's
-- first-parent depth (git rev-list --count --first-parent), NULL when unknown.
ALTER TABLE commits ADD COLUMN generation INTEGER;
CREATE INDEX commits_generation ON commits(tree_id, generation);

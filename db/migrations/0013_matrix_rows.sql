-- version 13: the matrix page's rows (db.matrix), computed when a commit's builds are written
-- (Store.record_build, in the build's transaction) so a request reads one page of stored rows
-- instead of every symbol of the commit's builds. One table per (commit, target) ('' : every
-- target, the page without ?target=); a commit without one (stored before 13) is computed per
-- request, the same way.
CREATE TABLE matrix_tables (
    commit_id  INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    target     TEXT NOT NULL,
    toolchains TEXT NOT NULL,           -- JSON list, in the page's column order
    functions  INTEGER NOT NULL,        -- source functions (clones summed)
    differing  INTEGER NOT NULL,        -- ... whose size or inline status differs between toolchains
    PRIMARY KEY (commit_id, target)
) WITHOUT ROWID;

CREATE TABLE matrix_rows (
    commit_id INTEGER NOT NULL,
    target    TEXT NOT NULL,
    pos       INTEGER NOT NULL,         -- rank among all rows: widest spread first, then by name
    diff_pos  INTEGER,                  -- rank among the differing rows; NULL: the same everywhere
    function  TEXT NOT NULL,
    spread    INTEGER NOT NULL,
    cells     TEXT NOT NULL,            -- JSON {toolchain: [size, declared, out_of_line, inlined_count, [symbols]]}
    PRIMARY KEY (commit_id, target, pos),
    FOREIGN KEY (commit_id, target) REFERENCES matrix_tables(commit_id, target) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE INDEX matrix_rows_differing ON matrix_rows(commit_id, target, diff_pos) WHERE diff_pos IS NOT NULL;

-- change counters (0012): a matrix table's rows are written with it, in the same transaction, so the
-- table row's triggers cover them (as a build row's cover its objects and symbols)
CREATE TRIGGER changes_matrix_insert AFTER INSERT ON matrix_tables BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || NEW.commit_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_matrix_update AFTER UPDATE ON matrix_tables BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || NEW.commit_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_matrix_delete AFTER DELETE ON matrix_tables BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || OLD.commit_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;

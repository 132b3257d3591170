-- version 13 on PostgreSQL: 0013_matrix_rows.sql's tables (as db.dialect rewrites them) and its
-- change-counter triggers, as plpgsql (the functions of 0012's PostgreSQL twin).
CREATE TABLE matrix_tables (
    commit_id  BIGINT NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    target     TEXT COLLATE "C" NOT NULL,
    toolchains TEXT COLLATE "C" NOT NULL,           -- JSON list, in the page's column order
    functions  BIGINT NOT NULL,
    differing  BIGINT NOT NULL,
    PRIMARY KEY (commit_id, target)
);

CREATE TABLE matrix_rows (
    commit_id BIGINT NOT NULL,
    target    TEXT COLLATE "C" NOT NULL,
    pos       BIGINT NOT NULL,
    diff_pos  BIGINT,
    function  TEXT COLLATE "C" NOT NULL,
    spread    BIGINT NOT NULL,
    cells     TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (commit_id, target, pos),
    FOREIGN KEY (commit_id, target) REFERENCES matrix_tables(commit_id, target) ON DELETE CASCADE
);

CREATE INDEX matrix_rows_differing ON matrix_rows(commit_id, target, diff_pos) WHERE diff_pos IS NOT NULL;

CREATE TRIGGER changes_matrix_insert AFTER INSERT ON matrix_tables FOR EACH ROW EXECUTE FUNCTION changes_of_commit_id();
CREATE TRIGGER changes_matrix_update AFTER UPDATE ON matrix_tables FOR EACH ROW EXECUTE FUNCTION changes_of_commit_id();
CREATE TRIGGER changes_matrix_delete AFTER DELETE ON matrix_tables FOR EACH ROW EXECUTE FUNCTION changes_of_commit_id();

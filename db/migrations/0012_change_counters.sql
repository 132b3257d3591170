-- version 12: change counters, what the dashboard's caches are keyed by (web.cache). A stored
-- result never changes once written, so a page only changes when rows under it are written:
-- each write bumps the counter of the store ('store'), of the commit it belongs to ('c:<commit id>')
-- and of the series ('s:<series id>'); migrations bump 'schema' (db.migrate). A page's key is the
-- counters under it (one indexed read per request) and changes in the transaction that writes the
-- rows, so no reader can see new rows under an old key. 'store_id' tells a store from one recreated
-- at the same path (counters start again at 1 there). Counters only grow: a deleted commit's stays.
-- A build's child rows (objects, symbols, functions, remarks) are written with the build row, in
-- the same transaction (Store.record_build): the build row's trigger covers them.
CREATE TABLE change_counters (
    scope TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO change_counters(scope, n) VALUES ('store_id', abs(random())), ('store', 1), ('schema', 1);

-- commits: the commit's own page (an upsert that changes nothing bumps nothing) (subject, parent) and every list of commits
CREATE TRIGGER changes_commit_insert AFTER INSERT ON commits BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || NEW.id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_commit_update AFTER UPDATE ON commits
WHEN OLD.sha IS NOT NEW.sha OR OLD.parent_sha IS NOT NEW.parent_sha OR OLD.subject IS NOT NEW.subject
  OR OLD.author IS NOT NEW.author OR OLD.date IS NOT NEW.date OR OLD.tree_id IS NOT NEW.tree_id
  OR OLD.generation IS NOT NEW.generation
BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || NEW.id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_commit_delete AFTER DELETE ON commits BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || OLD.id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;

-- builds (and with them their objects, symbols, functions, remarks, function sizes)
CREATE TRIGGER changes_build_insert AFTER INSERT ON builds BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || NEW.commit_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_build_update AFTER UPDATE ON builds BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || NEW.commit_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_build_delete AFTER DELETE ON builds BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('c:' || OLD.commit_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;

-- comparisons, their tables and findings: the head build's commit
CREATE TRIGGER changes_comparison_insert AFTER INSERT ON comparisons BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = NEW.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_comparison_update AFTER UPDATE ON comparisons BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = NEW.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_comparison_delete AFTER DELETE ON comparisons BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = OLD.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_comparison_tables_insert AFTER INSERT ON comparison_tables BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = NEW.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_comparison_tables_update AFTER UPDATE ON comparison_tables BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = NEW.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_findings_insert AFTER INSERT ON findings BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = NEW.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_findings_delete AFTER DELETE ON findings BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = OLD.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;

-- series (a new version is a new row) and their patches (also shown on the patches' commit pages)
CREATE TRIGGER changes_series_insert AFTER INSERT ON series BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('s:' || NEW.id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_series_update AFTER UPDATE ON series BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('s:' || NEW.id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_series_delete AFTER DELETE ON series BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('s:' || OLD.id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_series_patch_insert AFTER INSERT ON series_patches BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('s:' || NEW.series_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
    INSERT INTO change_counters(scope, n) SELECT 'c:' || id, 1 FROM commits WHERE sha = NEW.commit_sha
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_series_patch_update AFTER UPDATE ON series_patches BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('s:' || NEW.series_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
    INSERT INTO change_counters(scope, n) SELECT 'c:' || id, 1 FROM commits WHERE sha IN (NEW.commit_sha, OLD.commit_sha)
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_series_patch_delete AFTER DELETE ON series_patches BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) VALUES ('s:' || OLD.series_id, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1;
    INSERT INTO change_counters(scope, n) SELECT 'c:' || id, 1 FROM commits WHERE sha = OLD.commit_sha
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;

-- trees: their names and paths are on every list
CREATE TRIGGER changes_tree_insert AFTER INSERT ON trees BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
END;
CREATE TRIGGER changes_tree_update AFTER UPDATE ON trees
WHEN OLD.name IS NOT NEW.name OR OLD.path IS NOT NEW.path OR OLD.url IS NOT NEW.url
BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
END;

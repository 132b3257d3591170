-- version 17: a measurement (0016) written alone for a stored build (Store.record_runtime) changes the
-- commit's pages: bump the store's and the build's commit's change counters (0012), in its transaction.
-- runtime_functions rows are written with their runtimes row: covered by these.
CREATE TRIGGER changes_runtime_insert AFTER INSERT ON runtimes BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = NEW.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_runtime_update AFTER UPDATE ON runtimes BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = NEW.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER changes_runtime_delete AFTER DELETE ON runtimes BEGIN
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
    INSERT INTO change_counters(scope, n) SELECT 'c:' || commit_id, 1 FROM builds WHERE id = OLD.build_id
        ON CONFLICT(scope) DO UPDATE SET n = n + 1;
END;

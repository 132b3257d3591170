-- version 17 on PostgreSQL: 0017_runtime_triggers.sql's triggers with 0012's trigger function for rows
-- carrying a build id (the store's and the build's commit's counters), the same trigger names.
CREATE TRIGGER changes_runtime_insert AFTER INSERT ON runtimes FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_runtime_update AFTER UPDATE ON runtimes FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_runtime_delete AFTER DELETE ON runtimes FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();

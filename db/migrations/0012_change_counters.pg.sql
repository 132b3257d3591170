-- version 12 on PostgreSQL: 0012_change_counters.sql's table and triggers, as plpgsql. The same
-- counters, bumped by the same writes, in the writing transaction; the same trigger names.
CREATE TABLE change_counters (
    scope TEXT COLLATE "C" PRIMARY KEY,
    n     BIGINT NOT NULL
);

INSERT INTO change_counters(scope, n)
    VALUES ('store_id', floor(random() * 9007199254740991)::bigint), ('store', 1), ('schema', 1);

CREATE FUNCTION changes_bump(what text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO change_counters(scope, n) VALUES (what, 1)
        ON CONFLICT(scope) DO UPDATE SET n = change_counters.n + 1;
$$;

CREATE FUNCTION changes_store() RETURNS void LANGUAGE sql AS $$
    UPDATE change_counters SET n = n + 1 WHERE scope = 'store';
$$;

-- commits: the commit's own page and every list of commits
CREATE FUNCTION changes_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    PERFORM changes_store();
    PERFORM changes_bump('c:' || r.id);
    RETURN NULL;
END $$;
CREATE TRIGGER changes_commit_insert AFTER INSERT ON commits FOR EACH ROW EXECUTE FUNCTION changes_commit();
CREATE TRIGGER changes_commit_update AFTER UPDATE ON commits FOR EACH ROW
WHEN (OLD.sha IS DISTINCT FROM NEW.sha OR OLD.parent_sha IS DISTINCT FROM NEW.parent_sha
  OR OLD.subject IS DISTINCT FROM NEW.subject OR OLD.author IS DISTINCT FROM NEW.author
  OR OLD.date IS DISTINCT FROM NEW.date OR OLD.tree_id IS DISTINCT FROM NEW.tree_id
  OR OLD.generation IS DISTINCT FROM NEW.generation)
EXECUTE FUNCTION changes_commit();
CREATE TRIGGER changes_commit_delete AFTER DELETE ON commits FOR EACH ROW EXECUTE FUNCTION changes_commit();

-- rows carrying their commit's id: builds (and with them their objects, symbols, functions, ...)
CREATE FUNCTION changes_of_commit_id() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    PERFORM changes_store();
    PERFORM changes_bump('c:' || r.commit_id);
    RETURN NULL;
END $$;
CREATE TRIGGER changes_build_insert AFTER INSERT ON builds FOR EACH ROW EXECUTE FUNCTION changes_of_commit_id();
CREATE TRIGGER changes_build_update AFTER UPDATE ON builds FOR EACH ROW EXECUTE FUNCTION changes_of_commit_id();
CREATE TRIGGER changes_build_delete AFTER DELETE ON builds FOR EACH ROW EXECUTE FUNCTION changes_of_commit_id();

-- rows carrying a build id: comparisons, their tables and findings (the head build's commit)
CREATE FUNCTION changes_of_build_id() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    PERFORM changes_store();
    PERFORM changes_bump('c:' || commit_id) FROM builds WHERE id = r.build_id;
    RETURN NULL;
END $$;
CREATE TRIGGER changes_comparison_insert AFTER INSERT ON comparisons FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_comparison_update AFTER UPDATE ON comparisons FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_comparison_delete AFTER DELETE ON comparisons FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_comparison_tables_insert AFTER INSERT ON comparison_tables FOR EACH ROW
    EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_comparison_tables_update AFTER UPDATE ON comparison_tables FOR EACH ROW
    EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_findings_insert AFTER INSERT ON findings FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();
CREATE TRIGGER changes_findings_delete AFTER DELETE ON findings FOR EACH ROW EXECUTE FUNCTION changes_of_build_id();

-- series (a new version is a new row) and their patches (also shown on the patches' commit pages)
CREATE FUNCTION changes_series() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    PERFORM changes_store();
    PERFORM changes_bump('s:' || r.id);
    RETURN NULL;
END $$;
CREATE TRIGGER changes_series_insert AFTER INSERT ON series FOR EACH ROW EXECUTE FUNCTION changes_series();
CREATE TRIGGER changes_series_update AFTER UPDATE ON series FOR EACH ROW EXECUTE FUNCTION changes_series();
CREATE TRIGGER changes_series_delete AFTER DELETE ON series FOR EACH ROW EXECUTE FUNCTION changes_series();

CREATE FUNCTION changes_series_patch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    PERFORM changes_store();
    PERFORM changes_bump('s:' || r.series_id);
    IF TG_OP = 'UPDATE' THEN
        PERFORM changes_bump('c:' || id) FROM commits WHERE sha IN (NEW.commit_sha, OLD.commit_sha);
    ELSE
        PERFORM changes_bump('c:' || id) FROM commits WHERE sha = r.commit_sha;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER changes_series_patch_insert AFTER INSERT ON series_patches FOR EACH ROW
    EXECUTE FUNCTION changes_series_patch();
CREATE TRIGGER changes_series_patch_update AFTER UPDATE ON series_patches FOR EACH ROW
    EXECUTE FUNCTION changes_series_patch();
CREATE TRIGGER changes_series_patch_delete AFTER DELETE ON series_patches FOR EACH ROW
    EXECUTE FUNCTION changes_series_patch();

-- trees: their names and paths are on every list
CREATE FUNCTION changes_tree() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM changes_store();
    RETURN NULL;
END $$;
CREATE TRIGGER changes_tree_insert AFTER INSERT ON trees FOR EACH ROW EXECUTE FUNCTION changes_tree();
CREATE TRIGGER changes_tree_update AFTER UPDATE ON trees FOR EACH ROW
WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.path IS DISTINCT FROM NEW.path OR OLD.url IS DISTINCT FROM NEW.url)
EXECUTE FUNCTION changes_tree();

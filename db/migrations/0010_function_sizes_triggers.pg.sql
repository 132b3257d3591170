-- version 10 on PostgreSQL: 0010_function_sizes_triggers.sql's rebuild and triggers, as plpgsql
-- (strpos for sqlite's instr; a trigger function per sqlite trigger, same names, same effect).
DELETE FROM function_sizes;

INSERT INTO names(name)
    SELECT DISTINCT substr(name, 1, strpos(name, '.') - 1) FROM names WHERE strpos(name, '.') > 1
    ON CONFLICT DO NOTHING;

INSERT INTO function_sizes(name_id, build_id, size)
    WITH base_of(id, base) AS (
        SELECT n.id, b.id FROM names n JOIN names b ON b.name = substr(n.name, 1, strpos(n.name || '.', '.') - 1)
        WHERE substr(n.name, 1, 1) != '.')
    SELECT bo.base, o.build_id, sum(s.size) FROM objects o JOIN symbols s ON s.object_id = o.id
    JOIN base_of bo ON bo.id = s.name_id
    WHERE s.letter IN ('t', 'T', 'w', 'W') GROUP BY bo.base, o.build_id;

-- a build of several objects takes the facts of its last object (sqlite: the last row of the ordered
-- upsert wins; PostgreSQL updates a row once per statement, so the last object is picked first)
INSERT INTO function_sizes(name_id, build_id, declared, out_of_line, inlined_count)
    SELECT DISTINCT ON (f.name_id, o.build_id) f.name_id, o.build_id, f.declared, f.out_of_line, f.inlined_count
    FROM objects o JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id
    WHERE strpos(n.name, '.') = 0 ORDER BY f.name_id, o.build_id, o.id DESC
    ON CONFLICT(name_id, build_id) DO UPDATE SET declared = excluded.declared,
        out_of_line = excluded.out_of_line, inlined_count = excluded.inlined_count;

CREATE FUNCTION function_sizes_symbol() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO names(name)
        SELECT substr(name, 1, strpos(name, '.') - 1) FROM names WHERE id = NEW.name_id AND strpos(name, '.') > 1
        ON CONFLICT DO NOTHING;
    INSERT INTO function_sizes(name_id, build_id, size)
        SELECT b.id, o.build_id, NEW.size FROM names n
        JOIN names b ON b.name = substr(n.name, 1, strpos(n.name || '.', '.') - 1)
        JOIN objects o ON o.id = NEW.object_id
        WHERE n.id = NEW.name_id AND substr(n.name, 1, 1) != '.'
        ON CONFLICT(name_id, build_id) DO UPDATE SET size = coalesce(function_sizes.size, 0) + excluded.size;
    RETURN NULL;
END $$;
CREATE TRIGGER function_sizes_symbol AFTER INSERT ON symbols
    FOR EACH ROW WHEN (NEW.letter IN ('t', 'T', 'w', 'W')) EXECUTE FUNCTION function_sizes_symbol();

CREATE FUNCTION function_sizes_facts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO function_sizes(name_id, build_id, declared, out_of_line, inlined_count)
        SELECT NEW.name_id, o.build_id, NEW.declared, NEW.out_of_line, NEW.inlined_count FROM objects o
        JOIN names n ON n.id = NEW.name_id
        WHERE o.id = NEW.object_id AND strpos(n.name, '.') = 0
        ON CONFLICT(name_id, build_id) DO UPDATE SET declared = excluded.declared,
            out_of_line = excluded.out_of_line, inlined_count = excluded.inlined_count;
    RETURN NULL;
END $$;
CREATE TRIGGER function_sizes_facts AFTER INSERT ON functions
    FOR EACH ROW EXECUTE FUNCTION function_sizes_facts();

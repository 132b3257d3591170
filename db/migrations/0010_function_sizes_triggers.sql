-- version 10: function_sizes (0009) kept up to date by the database itself, whichever sizewatch
-- writes the rows: an older sizewatch writing to a migrated store, or a tool copying rows (the
-- bench store). Every text symbol inserted adds its size to its source function (the name up to
-- its first dot), every function's facts are set; a build's rows go with it (ON DELETE CASCADE).
-- The table is first rebuilt from the rows stored so far, builds written without it included
-- (~40 s for 1,000 commits x 8 toolchains, once).
DELETE FROM function_sizes;

INSERT OR IGNORE INTO names(name)
    SELECT DISTINCT substr(name, 1, instr(name, '.') - 1) FROM names WHERE instr(name, '.') > 1;

INSERT INTO function_sizes(name_id, build_id, size)
    WITH base_of(id, base) AS (
        SELECT n.id, b.id FROM names n JOIN names b ON b.name = substr(n.name, 1, instr(n.name || '.', '.') - 1)
        WHERE substr(n.name, 1, 1) != '.')
    SELECT bo.base, o.build_id, sum(s.size) FROM objects o JOIN symbols s ON s.object_id = o.id
    JOIN base_of bo ON bo.id = s.name_id
    WHERE s.letter IN ('t', 'T', 'w', 'W') GROUP BY bo.base, o.build_id;

-- a build of several objects takes the facts of its last object, as the history did before
INSERT INTO function_sizes(name_id, build_id, declared, out_of_line, inlined_count)
    SELECT f.name_id, o.build_id, f.declared, f.out_of_line, f.inlined_count
    FROM objects o JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id
    WHERE instr(n.name, '.') = 0 ORDER BY o.id
    ON CONFLICT(name_id, build_id) DO UPDATE SET declared = excluded.declared,
        out_of_line = excluded.out_of_line, inlined_count = excluded.inlined_count;

CREATE TRIGGER function_sizes_symbol AFTER INSERT ON symbols
WHEN NEW.letter IN ('t', 'T', 'w', 'W')
BEGIN
    INSERT OR IGNORE INTO names(name)
        SELECT substr(name, 1, instr(name, '.') - 1) FROM names WHERE id = NEW.name_id AND instr(name, '.') > 1;
    INSERT INTO function_sizes(name_id, build_id, size)
        SELECT b.id, o.build_id, NEW.size FROM names n
        JOIN names b ON b.name = substr(n.name, 1, instr(n.name || '.', '.') - 1)
        JOIN objects o ON o.id = NEW.object_id
        WHERE n.id = NEW.name_id AND substr(n.name, 1, 1) != '.'
        ON CONFLICT(name_id, build_id) DO UPDATE SET size = coalesce(size, 0) + excluded.size;
END;

CREATE TRIGGER function_sizes_facts AFTER INSERT ON functions
BEGIN
    INSERT INTO function_sizes(name_id, build_id, declared, out_of_line, inlined_count)
        SELECT NEW.name_id, o.build_id, NEW.declared, NEW.out_of_line, NEW.inlined_count FROM objects o
        JOIN names n ON n.id = NEW.name_id
        WHERE o.id = NEW.object_id AND instr(n.name, '.') = 0
        ON CONFLICT(name_id, build_id) DO UPDATE SET declared = excluded.declared,
            out_of_line = excluded.out_of_line, inlined_count = excluded.inlined_count;
END;

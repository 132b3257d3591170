-- version 5: covering indexes for a function's history across every stored build
-- (the function page and `sizewatch history`): the symbol sizes and inline status are read
-- from the index alone, without touching the tables (1,000 commits x 8 toolchains: 18 -> 9 ms).
DROP INDEX IF EXISTS symbols_name;
CREATE INDEX symbols_name ON symbols(name_id, object_id, letter, size);
DROP INDEX IF EXISTS functions_name;
CREATE INDEX functions_name ON functions(name_id, object_id, declared, out_of_line, inlined_count);

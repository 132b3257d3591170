-- version 7: the dashboard's summaries (index and series pages: severity counts and the worst
-- finding of ~1,000 builds per page) read findings from this index alone, never the rows with
-- their JSON data (1,000 builds: 36 -> 8 ms).
CREATE INDEX findings_summary ON findings(build_id, base_build_id, severity, kind, function);

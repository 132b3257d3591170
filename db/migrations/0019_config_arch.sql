-- version 19: the arch of configs written before the pipeline recorded it (issue 30). Every build's
-- config row was written with the column's default, x86_64, arm64 builds included; an arm64 config's
-- key always holds "-arm64-" after its name (toolchains.kbuild.Config.key: NAME-arm64-[thinlto-]HASH),
-- an x86_64 key never does (its keys have no arch). Portable SQL only (PG-CONVENTION).

UPDATE configs SET arch = 'arm64' WHERE arch = 'x86_64' AND key LIKE '%-arm64-%';

-- The matrix tables of commits with arm64 or ThinLTO builds mixed them with x86_64's under one column
-- per toolchain (the latest build won): dropped, so the page ranks them per arch again from the builds
-- (per request, or `sizewatch db matrix`), as for a commit stored before 0013.
DELETE FROM matrix_rows WHERE commit_id IN (SELECT b.commit_id FROM builds b JOIN configs cf ON cf.id = b.config_id
                                            WHERE cf.arch <> 'x86_64' OR cf.key LIKE '%-thinlto-%');
DELETE FROM matrix_tables WHERE commit_id IN (SELECT b.commit_id FROM builds b JOIN configs cf ON cf.id = b.config_id
                                              WHERE cf.arch <> 'x86_64' OR cf.key LIKE '%-thinlto-%');

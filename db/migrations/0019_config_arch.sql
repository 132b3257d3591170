-- version 19: the arch of configs written before the pipeline recorded it (issue 30). Every build's
-- config row was written with the column's default, x86_64, arm64 builds included; an arm64 config's
-- key always holds "-arm64-" after its name (toolchains.kbuild.Config.key: NAME-arm64-[thinlto-]HASH),
-- an x86_64 key never does (its keys have no arch). Portable SQL only (PG-CONVENTION).

UPDATE configs SET arch = 'arm64' WHERE arch = 'x86_64' AND key LIKE '%-arm64-%';

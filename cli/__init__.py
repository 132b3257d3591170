"""The commands, on top of every layer: ``sizewatch`` (``cli.main``, one table of lazily loaded
subcommands) and ``sizediff`` (``cli.sizediff``). Nothing is imported here, so ``sizediff``'s
bloat-o-meter path starts without click."""

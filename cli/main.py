"""The ``sizewatch`` command: one table of subcommands, each loaded only when it runs.

The commands sit on top of every layer (analyzer → toolchains → db → ci → web) and are thin:
they parse options, call one function of a lower layer and print. A subcommand's module is
imported only when that subcommand is invoked (or its help is asked for), so ``sizewatch
inspect`` never loads the build, store or web stacks; ``serve`` is the only command that
imports Flask. Every command reports a ``SizewatchError`` as one line and exit status 1
(``cli.common``).
"""
from __future__ import annotations

import importlib

import click

# name -> (module, attribute): the whole command table
COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("cli.inspect", "inspect"),
    "example": ("cli.example", "example"),
    "toolchains": ("cli.toolchains", "toolchains_cmd"),
    "build": ("cli.toolchains", "build_cmd"),
    "run": ("cli.pipeline", "run_cmd"),
    "report": ("cli.pipeline", "report_cmd"),
    "history": ("cli.pipeline", "history_cmd"),
    "bisect": ("cli.bisect", "bisect_cmd"),
    "bot": ("cli.bot", "bot_cmd"),
    "serve": ("cli.serve", "serve_cmd"),
    "db": ("cli.db", "db_cmd"),
    "worker": ("cli.queue", "worker_cmd"),
    "queue": ("cli.queue", "queue_cmd"),
    "measure": ("cli.measure", "measure_cmd"),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use (click's documented lazy pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        where = COMMANDS.get(name)
        if where is None:
            return None
        module, attr = where
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def group() -> None:
    """Static code-size and inlining analysis for Linux kernel builds."""


def main(args: list[str] | None = None) -> None:
    """The console script: usage errors are one line too (``cli.common.run_standalone``)."""
    from cli.common import run_standalone
    run_standalone(group, args, "sizewatch")


if __name__ == "__main__":
    main()

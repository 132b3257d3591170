"""The ``sizewatch`` command: a thin layer over the analysis and build modules."""
from __future__ import annotations

import sys

import click

from analyzer import bloat, formats
from analyzer.errors import InputError
from toolchains.errors import BuildError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Static code-size and inlining analysis for Linux kernel builds."""


@main.command()
@click.option("--toolchain", default="gcc-12", show_default=True)
@click.option("--target", default="mm/page_alloc.o", show_default=True)
def example(toolchain: str, target: str) -> None:
    """Build TARGET at each patch of the examples/ series and print sizediff tables."""
    from toolchains.example import build_series
    try:
        built = build_series(toolchain, target)
        for old, new in zip(built, built[1:]):
            click.echo(f"## {toolchain} {target}: {old.commit[:12]} -> {new.commit[:12]} {new.subject}")
            tables = bloat.diff(bloat.read_symbols(old.object_path), bloat.read_symbols(new.object_path))
            click.echo(formats.bloat_text(tables))
    except (BuildError, InputError) as e:
        click.echo(f"sizewatch: {e}", err=True)
        sys.exit(1)


from analyzer.inspect_cli import inspect as _inspect  # noqa: E402  inline facts (issue 3)
main.add_command(_inspect)

from ci.commands import COMMANDS as _PIPELINE_COMMANDS  # noqa: E402  run, report, history (issue 5)
for _cmd in _PIPELINE_COMMANDS:
    main.add_command(_cmd)

from toolchains.commands import COMMANDS as _BUILD_COMMANDS  # noqa: E402  toolchains, build (issue 4)
for _cmd in _BUILD_COMMANDS:
    main.add_command(_cmd)

from ci.bot_cli import COMMANDS as _BOT_COMMANDS  # noqa: E402  the mailing-list bot (issue 7)
for _cmd in _BOT_COMMANDS:
    main.add_command(_cmd)

from web.serve import serve_cmd as _serve  # noqa: E402  the dashboard (issue 6)
main.add_command(_serve)


if __name__ == "__main__":
    main()

"""``sizewatch example``: the worked example's tables without the store (a thin layer over
toolchains.example)."""
from __future__ import annotations

import click

from cli.common import one_line_errors
from cli.output import emit
from toolchains.registry import DEFAULT_TOOLCHAINS
from toolchains.targets import DEFAULT_TARGETS


@click.command("example")
@click.option("--toolchain", default=DEFAULT_TOOLCHAINS[0], show_default=True)
@click.option("--target", default=DEFAULT_TARGETS[0], show_default=True)
def example(toolchain: str, target: str) -> None:
    """Build TARGET at each patch of the packaged example series and print sizediff tables."""
    from analyzer import bloat, formats
    from toolchains.example import build_series
    with one_line_errors():
        built = build_series(toolchain, target)
        for old, new in zip(built, built[1:]):
            tables = bloat.diff(bloat.read_symbols(old.object_path), bloat.read_symbols(new.object_path))
            emit(f"## {toolchain} {target}: {old.commit[:12]} -> {new.commit[:12]} {new.subject}\n"
                 + formats.bloat_text(tables) + "\n")

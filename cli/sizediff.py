"""``sizediff base.o head.o``: bloat-o-meter's table by default, and the views it lacks.

The entry point. A command line bloat-o-meter itself takes (``[-c | -d | -t]
[-p PREFIX] FILE1 FILE2``, and ``--no-weak``) is run here without importing
click: that import alone (~20 ms) was a tenth of a vmlinux diff's wall time and
a fifth of an object pair's. Every other command line, help and usage errors
included, goes to the click command in :mod:`cli.sizediff_command`.
"""
from __future__ import annotations

import sys

from analyzer import bloat, formats
from analyzer.errors import SizewatchError
from cli.output import emit_and_exit

_MODES = {"-c": "c", "-d": "d", "-t": "t"}


def plain_args(args: list[str]) -> tuple[str, bool, str, str] | None:
    """(mode, weak, file1, file2) when ``args`` is a bloat-o-meter command line,
    read as the click command reads it; None for anything else (left to click)."""
    mode, weak, files = "default", True, []
    rest = iter(args)
    for arg in rest:
        if arg in _MODES and mode == "default":
            mode = _MODES[arg]
        elif arg == "--no-weak":
            weak = False
        elif arg == "-p":                         # the cross prefix: the ELF is read directly
            if next(rest, "-").startswith("-"):   # missing, or a value click may read otherwise
                return None
        elif arg and not arg.startswith("-"):
            files.append(arg)
        else:
            return None
    return (mode, weak, files[0], files[1]) if len(files) == 2 else None


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``sizediff``)."""
    args = sys.argv[1:] if argv is None else list(argv)
    plain = plain_args(args)
    if plain is None:
        from cli.sizediff_command import main as click_main
        click_main(args)
        return
    mode, weak, file1, file2 = plain
    try:
        tables = bloat.diff_files(file1, file2, mode, weak=weak)
    except SizewatchError as e:
        import click                              # as the click command reports it, byte for byte
        click.echo(f"sizediff: {e}", err=True)
        sys.exit(1)
    emit_and_exit(formats.bloat_text(tables))


if __name__ == "__main__":
    main()

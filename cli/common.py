"""What every command shares: the one error convention, list options and the store option.

Every expected failure in any layer is a ``SizewatchError`` (``analyzer.errors``); a command runs
its work inside ``one_line_errors`` and the user sees ``<prog>: <message>`` on stderr and exit
status 1, never a traceback. Output goes through ``cli.output``.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

import click

from analyzer.errors import SizewatchError


@contextmanager
def one_line_errors(prog: str = "sizewatch") -> Iterator[None]:
    """Turn a SizewatchError into one line on stderr and exit status 1."""
    try:
        yield
    except SizewatchError as e:
        click.echo(f"{prog}: {e}", err=True)
        sys.exit(1)


def warn_damage() -> None:
    """One line on stderr when the store had damaged rows (read as marked values, see db.sqlite)."""
    from db.sqlite import take_damage
    notes = take_damage()
    if notes:
        click.echo(f"sizewatch: warning: unreadable in the store: {'; '.join(notes[:5])}"
                   f"{f' (+{len(notes) - 5} more)' if len(notes) > 5 else ''}; see sizewatch db check", err=True)


def split(value: str | None) -> list[str]:
    """A comma-separated option as a list (blank entries dropped)."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


db_option = click.option("--db", type=click.Path(dir_okay=False), default=None,
                         help="store file (default: $SIZEWATCH_DB or <cache>/sizewatch.db)")


def open_store(db: str | None, read_only: bool = False):
    """The store named by --db, else the default one (created and migrated as needed; with
    ``read_only`` it must exist and is opened ``mode=ro``: for commands that only read)."""
    from db.store import open_store as _open
    return _open(db, read_only=read_only)

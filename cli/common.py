"""What every command shares: the one error convention, list options and the store option.

Every expected failure in any layer is a ``SizewatchError`` (``analyzer.errors``); a command runs
its work inside ``one_line_errors`` and the user sees ``<prog>: <message>`` on stderr and exit
status 1, never a traceback. Output goes through ``cli.output``.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import click

from analyzer.errors import SizewatchError

T = TypeVar("T")


@contextmanager
def one_line_errors(prog: str = "sizewatch") -> Iterator[None]:
    """Turn a SizewatchError into one line on stderr and exit status 1."""
    try:
        yield
    except SizewatchError as e:
        click.echo(f"{prog}: {e}", err=True)
        sys.exit(1)


def run_standalone(command: click.Command, args: list[str] | None, prog_name: str) -> None:
    """Run a click command as a program, with usage errors as one line too (exit 2).

    click's own standalone mode prints a three-line usage block for a usage error; every other
    failure here is one line, so the shell sees one convention: one line on stderr, exit 1 for
    bad input, 2 for a bad command line, 130 when interrupted.
    """
    try:
        rv = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else prog_name
        click.echo(f"{where}: {e.format_message()} (see '{where} --help')", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"{prog_name}: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


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


class StoreParam(click.ParamType):
    """``--db``: a ``postgresql://`` URL as it is, anything else a file path (not a directory)."""
    name = "store"

    def convert(self, value, param, ctx):
        from db.dialect import is_url
        if is_url(value):
            return value
        return click.Path(dir_okay=False).convert(value, param, ctx)


db_option = click.option("--db", type=StoreParam(), default=None,
                         help="store: an sqlite file, or a postgresql://user:password@host:port/dbname URL "
                              "(default: $SIZEWATCH_DB or <cache>/sizewatch.db)")


def open_store(db: str | None, read_only: bool = False):
    """The store named by --db, else the default one (created and migrated as needed; with
    ``read_only`` it must exist and is opened ``mode=ro``: for commands that only read)."""
    from db.store import open_store as _open
    return _open(db, read_only=read_only)


WAIT_DEFAULT = 120

wait_option = click.option(
    "--wait", "wait_s", default=WAIT_DEFAULT, show_default=True, type=click.IntRange(0, 24 * 3600),
    envvar="SIZEWATCH_WAIT", metavar="S",
    help="a store or queue server not reachable yet (a service starting beside this one) is tried again "
         "for up to S seconds, saying so, before giving up (0: at once; also $SIZEWATCH_WAIT)")


def when_up(what: str, attempt: Callable[[], T], wait_s: float, unavailable: tuple[type[BaseException], ...],
            echo: Callable[[str], None] = lambda s: click.echo(s, err=True),
            sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> T:
    """``attempt()``, tried again while it raises one of ``unavailable`` (a server not reachable yet),
    for at most ``wait_s`` seconds: one line when the waiting starts, one when ``what`` is up, and
    after the deadline the last error as one line saying how long it waited. Any other error is
    raised at once (a wrong store, a missing file: waiting would not help)."""
    start = clock()
    delay = 0.5
    waited = False
    while True:
        try:
            value = attempt()
        except unavailable as e:
            spent = clock() - start
            if spent >= wait_s:
                if not waited:
                    raise
                raise type(e)(f"{e} (waited {spent:.0f} s)") from None
            if not waited:
                echo(f"sizewatch: waiting up to {wait_s:.0f} s for {what}: {e}")
                waited = True
            sleep(min(delay, max(wait_s - spent, 0.0)))
            delay = min(delay * 2, 5.0)
            continue
        if waited:
            echo(f"sizewatch: {what} is up after {clock() - start:.0f} s")
        return value

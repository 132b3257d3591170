"""``sizewatch db``: the store itself. ``check`` runs sqlite's integrity and foreign-key checks and
sizewatch's own (migrations known, JSON and compressed columns readable, numbers in number columns,
rows pointing at rows that exist) read-only: one line, exit 0 when sound, exit 1 naming what is damaged."""
from __future__ import annotations

from pathlib import Path

import click

from cli.common import db_option, one_line_errors


@click.group("db")
def db_cmd() -> None:
    """The store: check it, rank the matrix rows of commits stored before they were kept."""


@db_cmd.command("check")
@db_option
def check_cmd(db: str | None) -> None:
    """Check the store (read-only): integrity, migrations, every stored column readable."""
    from db.check import check_store
    from db.dialect import is_url
    from db.errors import StoreError
    from db.store import default_path
    with one_line_errors():
        where = db if db else default_path()
        res = check_store(where if is_url(str(where)) else Path(where))
        if not res.ok:
            raise StoreError(res.line())
        click.echo(f"sizewatch: {res.line()}")


@db_cmd.command("matrix")
@click.option("--all", "everything", is_flag=True, help="rank every commit again, not only those without rows")
@db_option
def matrix_cmd(everything: bool, db: str | None) -> None:
    """Rank the matrix page's rows of stored commits that lack them (stored before migration 0013):
    their pages then read stored rows instead of ranking per request."""
    from cli.common import open_store
    with one_line_errors():
        with open_store(db) as store:
            n = store.refresh_matrices(only_missing=not everything)
            click.echo(f"sizewatch: matrix rows ranked for {n} commit{'s' if n != 1 else ''}; store {store.path}")

"""``sizewatch serve``: the dashboard for a store (a thin click layer over web.server); the only
command that imports the web stack."""
from __future__ import annotations

import click

from cli.common import db_option, one_line_errors, wait_option, when_up


@click.command("serve")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", default=5000, show_default=True, type=click.IntRange(0, 65535),
              help="port (0: any free port, printed at start)")
@click.option("--token", envvar="SIZEWATCH_TOKEN", default=None,
              help="token that actions (re-run) need; also $SIZEWATCH_TOKEN. Without one the server is read-only")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="read the token from the first line of this file (keeps it out of the process list)")
@click.option("--workers", default=0, type=click.IntRange(0, 256),
              help="server processes  [default: 0, one per core]")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, 256),
              help="request threads per process (pages are CPU work under each process's GIL)")
@click.option("--page-cache-mb", default=256, show_default=True, type=click.IntRange(0, 1 << 20),
              help="bound of the rendered-page cache kept beside the store (<db>.pages); 0: none")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="warning",
              show_default=True, help="what goes to stderr; info: also a line per page rendered and why")
@click.option("--bot-config", type=click.Path(dir_okay=False), default=None,
              help="the bot's TOML config: the policy the /bot page shows (default: the built-in defaults)")
@wait_option
def serve_cmd(db: str | None, host: str, port: int, token: str | None, token_file: str | None, workers: int,
              threads: int, page_cache_mb: int, log_level: str, bot_config: str | None, wait_s: int) -> None:
    """Serve the dashboard (pages, JSON API under /api/) for a store, on gunicorn."""
    from web.server import serve, settings_for
    with one_line_errors():
        from db.errors import NoStoreYet
        from db.pg import StoreUnavailable
        # a database server down, or up with no store in it yet (its writers, the workers, make it)
        settings = when_up("the store",
                           lambda: settings_for(db, token, token_file, page_cache_mb, bot_config),
                           wait_s, (StoreUnavailable, NoStoreYet))
        serve(settings, host, port, threads, workers or None, log_level)

"""``sizewatch serve``: the dashboard on a production WSGI server (waitress: threaded, pure Python,
no fork, handles keep-alive; Flask's own server is for development only)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import click


@click.command("serve")
@click.option("--db", type=click.Path(dir_okay=False), default=None,
              help="store file (default: $SIZEWATCH_DB or <cache>/sizewatch.db)")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", default=5000, show_default=True, type=click.IntRange(0, 65535),
              help="port (0: any free port, printed at start)")
@click.option("--token", envvar="SIZEWATCH_TOKEN", default=None,
              help="token that actions (re-run) need; also $SIZEWATCH_TOKEN. Without one the server is read-only")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="read the token from the first line of this file (keeps it out of the process list)")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, 256),
              help="request threads (pages are CPU work under one GIL: more threads only queue behind each other)")
def serve_cmd(db: str | None, host: str, port: int, token: str | None, token_file: str | None, threads: int) -> None:
    """Serve the dashboard (pages, JSON API under /api/) for a store."""
    from db.errors import StoreError
    from db.store import default_path, open_store
    from web.settings import WebSettings, read_token
    try:
        path = Path(db) if db else default_path()
        if not path.is_file():
            raise StoreError(f"{path}: no store there yet (sizewatch run creates it)")
        settings = WebSettings(path.resolve(), read_token(token, token_file))
        store = open_store(settings.db)
    except (StoreError, ValueError) as e:
        click.echo(f"sizewatch: {e}", err=True)
        sys.exit(1)
    from waitress import create_server
    from web.app import create_app
    from web.heap import freeze_startup_heap
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # with few threads requests wait their turn by design: not a warning per queued request
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    app = create_app(settings, store)
    freeze_startup_heap(app)
    try:
        server = create_server(app, host=host, port=port, threads=threads, ident="sizewatch")
    except OSError as e:
        click.echo(f"sizewatch: cannot listen on {host}:{port}: {e.strerror}", err=True)
        sys.exit(1)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"sizewatch: serving {settings.db} on http://{shown}:{server.effective_port}/ "
               f"({'actions need the token' if settings.token else 'read-only: no token'})", err=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()

"""The dashboard on a production WSGI server (waitress: threaded, pure Python, no fork, handles
keep-alive; Flask's own server is for development only)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from db.errors import StoreError
from db.store import default_path, open_store
from web.settings import WebSettings, read_token


def settings_for(db: str | None, token: str | None, token_file: str | None,
                 bot_config: str | None = None) -> WebSettings:
    """What ``sizewatch serve`` was given, checked: the store must exist (serving never creates one)."""
    path = Path(db) if db else default_path()
    if not path.is_file():
        raise StoreError(f"{path}: no store there yet (sizewatch run creates it)")
    try:
        if bot_config:
            from ci.bot.policy import load_policy
            load_policy(Path(bot_config))                # a bad config fails at start, not per request
        return WebSettings(path.resolve(), read_token(token, token_file),
                           bot_config=Path(bot_config).resolve() if bot_config else None)
    except ValueError as e:
        raise StoreError(str(e)) from None


def serve(settings: WebSettings, host: str, port: int, threads: int) -> None:
    """Serve until interrupted; a port that cannot be bound is a StoreError-free one-line exit."""
    from waitress import create_server
    from web.app import create_app
    from web.heap import freeze_startup_heap
    store = open_store(settings.db, read_only=True)      # only reads: re-runs are processes of their own
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # with few threads requests wait their turn by design: not a warning per queued request
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    app = create_app(settings, store)
    freeze_startup_heap(app)
    try:
        server = create_server(app, host=host, port=port, threads=threads, ident="sizewatch")
    except OSError as e:
        print(f"sizewatch: cannot listen on {host}:{port}: {e.strerror}", file=sys.stderr)
        sys.exit(1)
    shown = f"[{host}]" if ":" in host else host
    print(f"sizewatch: serving {settings.db} on http://{shown}:{server.effective_port}/ "
          f"({'actions need the token' if settings.token else 'read-only: no token'})", file=sys.stderr, flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()

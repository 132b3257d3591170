"""The dashboard on a production WSGI server: gunicorn, a worker process per core (pages are CPU
work under each process's GIL: processes are what spreads them over the cores), each with a
few threads for keep-alive connections and requests waiting on the store. The workers share the
store (WAL: readers never wait for the writer) and the rendered-page cache beside it (web.cache).

The listening socket is bound here, before gunicorn starts: a port that cannot be bound is a
one-line error, and ``--port 0`` prints the port the kernel chose."""
from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path

from db.dialect import is_url, redact
from db.errors import StoreError
from db.store import default_path, open_store
from web.settings import WebSettings, read_token


def settings_for(db: str | None, token: str | None, token_file: str | None,
                 page_cache_mb: int = 256, bot_config: str | None = None) -> WebSettings:
    """What ``sizewatch serve`` was given, checked: the store must exist (serving never creates one)."""
    where = db if db else default_path()
    if is_url(str(where)):
        open_store(str(where), read_only=True).close()    # a missing or foreign database: one line, now
        path: Path | str = str(where)
    else:
        path = Path(where)
        if not path.is_file():
            raise StoreError(f"{path}: no store there yet (sizewatch run creates it)")
        path = path.resolve()
    try:
        if bot_config:
            from ci.bot.policy import load_policy
            load_policy(Path(bot_config))                # a bad config fails at start, not per request
        return WebSettings(path, read_token(token, token_file), pages_bytes=page_cache_mb << 20,
                           bot_config=Path(bot_config).resolve() if bot_config else None)
    except ValueError as e:
        raise StoreError(str(e)) from None


def default_workers() -> int:
    """A worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        print(f"sizewatch: cannot listen on {host}:{port}: {e.strerror}", file=sys.stderr)
        sys.exit(1)
    sock.set_inheritable(True)
    return sock


def serve(settings: WebSettings, host: str, port: int, threads: int, workers: int | None = None,
          log_level: str = "warning") -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM: the workers finish the requests they hold).
    ``log_level`` is sizewatch's own (gunicorn's stays at warnings): info adds a line on stderr per
    page rendered and why (web.cache)."""
    from gunicorn.app.base import BaseApplication

    open_store(settings.db, read_only=True).close()   # migrations applied once here, not by every worker
    sock = _listen(host, port)
    workers = workers or default_workers()
    shown = f"[{host}]" if ":" in host else host
    banner = (f"sizewatch: serving {redact(str(settings.db))} on http://{shown}:{sock.getsockname()[1]}/ "
              f"({workers} worker processes x {threads} threads; "
              f"{'actions need the token' if settings.token else 'read-only: no token'})")

    class Dashboard(BaseApplication):
        def load_config(self):
            for key, value in {
                "bind": [f"fd://{sock.fileno()}"], "workers": workers, "threads": threads,
                "worker_class": "gthread", "timeout": 120, "graceful_timeout": 5, "keepalive": 5,
                "loglevel": "warning", "accesslog": None, "errorlog": "-", "proc_name": "sizewatch-serve",
                "when_ready": lambda server: print(banner, file=sys.stderr, flush=True),
            }.items():
                self.cfg.set(key, value)

        def load(self):
            """In each worker, after the fork: its own store connections, page cache handle and heap."""
            from web.app import create_app
            from web.heap import freeze_startup_heap
            logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
            app = create_app(settings)
            freeze_startup_heap(app)
            return app

    try:
        Dashboard().run()
    except KeyboardInterrupt:
        pass
    finally:
        sock.detach()              # gunicorn closed the descriptor it was given

"""The dashboard's Flask application: one store, read-only pages, token-guarded actions."""
from __future__ import annotations

from flask import Flask

from db.store import Store, open_store
from web import cache, errors, formatting, guard
from web.jobs import Jobs
from web.pagecache import PageCache
from web.settings import WebSettings
from web.symbol_cache import SymbolCache
from web.templating import DashboardEnvironment


def create_app(settings: WebSettings, store: Store | None = None) -> Flask:
    """An app serving ``settings.db`` (or the given store). Each page module brings its own routes."""
    from web.pages import PAGES
    app = Flask(__name__)
    app.jinja_environment = DashboardEnvironment
    app.json.sort_keys = False
    app.extensions["sizewatch.settings"] = settings
    app.extensions["sizewatch.store"] = store if store is not None else open_store(settings.db, read_only=True)
    app.extensions["sizewatch.jobs"] = Jobs(settings.job_logs)
    app.extensions["sizewatch.symbols"] = SymbolCache()
    guard.register(app)                        # ids bounded, Origin checked, security headers
    # what a page's HTML depends on besides the store: the code, and whether actions are offered
    # (servers with and without a token share <db>.pages)
    app.extensions["sizewatch.code"] = cache.code_fingerprint() + (":actions" if settings.token else ":read-only")
    app.extensions["sizewatch.pages"] = PageCache(settings.page_cache, settings.pages_bytes) \
        if settings.pages_bytes > 0 else None
    for bp in PAGES:
        app.register_blueprint(bp)
    errors.register(app)
    cache.register(app)
    formatting.register(app)
    app.jinja_env.globals["actions_enabled"] = settings.token is not None
    return app

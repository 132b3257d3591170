"""The current request's store, settings and job runner (kept on the Flask app by create_app)."""
from __future__ import annotations

from flask import current_app

from db.store import Store
from web.jobs import Jobs
from web.settings import WebSettings


def store() -> Store:
    return current_app.extensions["sizewatch.store"]


def settings() -> WebSettings:
    return current_app.extensions["sizewatch.settings"]


def jobs() -> Jobs:
    return current_app.extensions["sizewatch.jobs"]


def symbol_cache():
    return current_app.extensions["sizewatch.symbols"]

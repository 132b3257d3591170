"""Error answers: a page for people, JSON under /api/, plain text for .txt URLs.

Unknown ids are 404s and malformed parameters 400s (raised with ``abort`` in the pages);
a store that cannot be read is a 503 with its one-line reason. Nothing a visitor types
reaches a traceback.
"""
from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, make_response, render_template, request
from werkzeug.exceptions import HTTPException

from db.errors import StoreError

log = logging.getLogger("sizewatch.web")


def _answer(status: int, title: str, message: str) -> Response:
    if request.path.startswith("/api/") or request.path == "/api":
        resp = jsonify({"error": message, "status": status})
    elif request.path.endswith(".txt"):
        resp = make_response(f"{status} {title}: {message}\n")
        resp.content_type = "text/plain; charset=utf-8"
    else:
        resp = make_response(render_template("error.html", status=status, title=title, message=message))
    resp.status_code = status
    return resp


def register(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException):
        message = e.description or e.name
        if e.code == 404 and message.startswith("The requested URL was not found"):
            message = f"nothing at {request.path}"
        resp = _answer(e.code or 500, e.name, message)
        if e.code == 405 and getattr(e, "valid_methods", None):
            resp.headers["Allow"] = ", ".join(e.valid_methods)
        return resp

    @app.errorhandler(StoreError)
    def store_error(e: StoreError):
        msg = str(e)
        if "ambiguous" in msg:
            return _answer(400, "Bad Request", f"{msg}: give more hex digits")
        log.error("store error on %s: %s", request.path, msg)
        return _answer(503, "Store unavailable", msg)

    @app.errorhandler(Exception)
    def unexpected(e: Exception):           # a bug: logged with its traceback, answered without it
        log.exception("unexpected error on %s", request.path)
        return _answer(500, "Internal Server Error", f"{type(e).__name__} (see the server log)")

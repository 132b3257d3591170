"""What every answer and every request goes through, whatever the page: security headers on each
response, an Origin check on each state-changing request, and ids in paths bounded to what sqlite
stores (a 400 for ``/series/99999999999999999999``, not an OverflowError).

The Content-Security-Policy allows only the app's own scripts, styles and images (``'self'``;
the pages have no inline script, the chart's data travels in a JSON block, which is not executed);
inline styles stay allowed because Chart.js sets them on its canvas.
"""
from __future__ import annotations

from urllib.parse import urlsplit

import json

from flask import Flask, abort, request
from werkzeug.routing import IntegerConverter

from db.sqlite import damage_notes, take_damage

MAX_ID = 2 ** 63 - 1                  # sqlite INTEGER

HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class IdConverter(IntegerConverter):
    """``<int:...>`` in every route: digits only, and at most sqlite's largest INTEGER."""

    def to_python(self, value: str) -> int:
        if len(value) > 19 or int(value) > MAX_ID:
            abort(400, description=f"{value[:30]}{'...' if len(value) > 30 else ''} is not an id: "
                                   f"expected a whole number up to {MAX_ID}")
        return int(value)


def cross_origin() -> str | None:
    """Why this state-changing request must be refused (None when it may go on). A browser sends
    Origin with every POST; a request without one (curl, a script with the token) is not a
    browser being used by another site. ``null`` (a sandboxed page, a file: URL) is refused."""
    origin = request.headers.get("Origin")
    if origin is None:
        return None
    if origin.strip().lower() == "null":
        return "a request from an opaque origin (Origin: null)"
    if urlsplit(origin).netloc.lower() != (request.host or "").lower():
        return f"a request from another site (Origin {origin[:80]!r}, this server is {request.host[:80]!r})"
    return None


def register(app: Flask) -> None:
    """Install the converter (before any blueprint is registered) and the request/response hooks."""
    app.url_map.converters["int"] = IdConverter

    app.jinja_env.globals["store_damage"] = damage_notes

    @app.before_request
    def _origin() -> None:
        take_damage()                          # a request sees only the damage it read
        if request.method not in SAFE_METHODS:
            why = cross_origin()
            if why:
                abort(403, description=f"refused {why}: actions start only from this dashboard's own pages")

    @app.after_request
    def _headers(resp):
        for k, v in HEADERS.items():
            resp.headers.setdefault(k, v)
        notes = take_damage()
        if notes:                              # the page was served with parts marked unreadable
            resp.headers["X-Sizewatch-Unreadable"] = str(len(notes))
            if resp.is_json and not resp.direct_passthrough:
                data = resp.get_json(silent=True)
                if isinstance(data, dict):
                    data["unreadable"] = notes
                    resp.set_data(json.dumps(data))
        return resp

"""Pages revalidated and cached by the store's change counters (db.changes), and text compressed.

Every cacheable page names the counters under it (``STAMPS``: the whole store, a commit and its
parent, a series and its commits). Per request, before any page work:

1. the stamp is read (one indexed read of ``change_counters``) and hashed with the path, the
   query parameters the page reads (``PARAMS``; any other is left out: ``/?junk=N`` is the index
   page, not a new cache entry that could evict real pages) and the code's own fingerprint into the
   page's key, sent as its ``ETag``;
2. a reader or proxy that already holds that page (``If-None-Match``) gets a 304;
3. a page another request (in any server process) rendered under that key is sent from the shared
   page cache (web.pagecache), already gzip-compressed;
4. otherwise the request claims the key and renders, compresses once, stores and sends the page;
   readers asking for it meanwhile (a mail just went out) wait for those bytes instead of
   rendering it again each.

``Cache-Control: public, no-cache``: readers and proxies may keep a page but ask before each use,
so nobody sees an old page after ``sizewatch run`` finished writing (the counters move in the
transaction that writes the rows). Error answers are never cached. Text answers that are not
pages (vendored scripts, style sheets, logs) are gzip-compressed too when the reader accepts it.
"""
from __future__ import annotations

import gzip
import hashlib
import logging
import time
from pathlib import Path
from typing import Callable

from flask import Flask, Response, current_app, g, request

from db.store import Store
from web import context

log = logging.getLogger("sizewatch.web")
# endpoint -> the stamp of the rows under it
STAMPS: dict[str, Callable[[Store, dict], tuple]] = {}
for _ep in ("index.page", "index.api", "function.page", "function.api"):
    STAMPS[_ep] = lambda store, args: store.change_stamp()
for _ep in ("commit.page", "commit.api", "commit.text", "matrix.page", "matrix.api"):
    STAMPS[_ep] = lambda store, args: store.change_stamp(commit=args["rev"])
for _ep in ("series.page", "series.api", "series.text"):
    STAMPS[_ep] = lambda store, args: store.change_stamp(series=args["sid"])

# endpoint -> the query parameters its page reads (web.params, each page's ``_args``): the only ones
# in its key. A parameter a page reads must be here, or two of its pages would share a key
# (tests/test_web_cache.py checks each page against what it reads).
PARAMS: dict[str, tuple[str, ...]] = {}
for _ep in ("index.page", "index.api"):
    PARAMS[_ep] = ("commits", "series", "tree", "arch", "lto")
for _ep in ("function.page", "function.api"):
    PARAMS[_ep] = ("toolchain", "target", "changes")
for _ep in ("commit.page", "commit.api", "commit.text", "series.text"):
    PARAMS[_ep] = ("toolchains", "target", "arch", "lto")
for _ep in ("series.page", "series.api"):
    PARAMS[_ep] = ("toolchains", "arch", "lto")
for _ep in ("matrix.page", "matrix.api"):
    PARAMS[_ep] = ("all", "target", "limit", "offset", "arch")

COMPRESSIBLE = ("text/html", "text/plain", "text/css", "text/javascript", "application/javascript",
                "application/json")
MIN_COMPRESS = 512          # bytes: below this gzip's header costs more than it saves
# gzip level of pages, compressed on the render path once per key: the function page's 340 kB take
# 1.6 ms at level 1 (39 kB) and 7 ms at the default 6 (37 kB) on the bench machine
PAGE_LEVEL = 1
CACHE_CONTROL = "public, no-cache"
WAIT_FOR_RENDER = 8.0       # seconds a reader waits for the request rendering its page before rendering it too
                            # (a cold worker on a loaded machine can take seconds: one render beats many)
_SOURCE_DIRS = ("analyzer", "toolchains", "db", "ci", "web")
_SOURCE_SUFFIXES = {".py", ".html", ".js", ".css", ".toml", ".sql"}


def code_fingerprint(root: Path = Path(__file__).resolve().parent.parent) -> str:
    """A hash of the code and templates that render the pages: a new sizewatch never serves pages
    cached by an older one (the page cache outlives the server)."""
    h = hashlib.sha256()
    for d in _SOURCE_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.suffix in _SOURCE_SUFFIXES and "node_modules" not in p.parts and p.is_file():
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _accepts_gzip() -> bool:
    return "gzip" in request.headers.get("Accept-Encoding", "")


def _page_headers(resp: Response, key: str) -> Response:
    resp.headers["ETag"] = f'W/"{key}"'
    resp.headers["Cache-Control"] = CACHE_CONTROL
    resp.vary.add("Accept-Encoding")
    return resp


def _from_gzip(ctype: str, body: bytes, state: str) -> Response:
    if _accepts_gzip():
        resp = Response(body, content_type=ctype)
        resp.headers["Content-Encoding"] = "gzip"
    else:
        resp = Response(gzip.decompress(body), content_type=ctype)
    resp.headers["X-Sizewatch-Cache"] = state
    return resp


def _before() -> Response | None:
    stamp_of = STAMPS.get(request.endpoint or "")
    if stamp_of is None or request.method not in ("GET", "HEAD"):
        return None
    stamp = stamp_of(context.store(), request.view_args or {})
    url = (request.path, [(name, request.args.get(name)) for name in PARAMS[request.endpoint] if name in request.args])
    key = hashlib.sha256(repr((current_app.extensions["sizewatch.code"], url, stamp)).encode()).hexdigest()[:32]
    g.page_key = key
    if f'"{key}"' in request.headers.get("If-None-Match", ""):
        g.page_key = None
        return _page_headers(Response(status=304), key)
    cache = current_app.extensions["sizewatch.pages"]
    if cache is None:
        return None
    hit, state, claimed = cache.get(key), "hit", False
    if hit is None and not cache.claim(key):              # being rendered by another request: wait for it
        t0 = time.monotonic()
        hit = cache.wait(key, WAIT_FOR_RENDER)
        g.page_waited = time.monotonic() - t0
        state = "waited"
    elif hit is None:
        # ours now; but another request may have stored the page and released its claim between our
        # look and our claim: look once more before rendering it a second time
        hit = cache.get(key)
        if hit is not None:
            cache.release(key)
        claimed = hit is None
    if hit is None:
        g.page_claimed = claimed                           # ours to release once rendered (or failed)
        g.page_started = time.monotonic()
        return None
    g.page_key = None
    return _page_headers(_from_gzip(*hit, state=state), key)


def _after(resp: Response) -> Response:
    key = g.pop("page_key", None)
    cache = current_app.extensions["sizewatch.pages"]
    try:
        if key is not None and resp.status_code == 200 and "Content-Encoding" not in resp.headers:
            _log_render(key)
            body = gzip.compress(resp.get_data(), PAGE_LEVEL)
            if cache is not None:
                cache.put(key, resp.content_type, body)
            return _page_headers(_from_gzip(resp.content_type, body, state="miss"), key)
        return compress(resp)
    finally:
        if key is not None and cache is not None and g.pop("page_claimed", False):
            cache.release(key)


def _log_render(key: str) -> None:
    """One line per page rendered (``sizewatch serve --log-level info``), saying why this request
    rendered it: it claimed the key, or it waited for another request's render in vain."""
    if not log.isEnabledFor(logging.INFO):
        return
    took = (time.monotonic() - g.page_started) * 1000 if "page_started" in g else 0.0
    if g.get("page_claimed"):
        why = "claimed"
    elif "page_waited" in g:
        why = f"waited {g.page_waited:.1f} s for another render"
    else:
        why = "no page cache"
    log.info("page rendered: %s key %s (%s) in %.0f ms", request.full_path.rstrip("?"), key, why, took)


_STATIC_GZ: dict[tuple, bytes] = {}       # (path, etag) of a static file -> its gzip body


def compress(resp: Response) -> Response:
    """gzip a text answer (not a page of STAMPS) for a reader that accepts it."""
    if resp.mimetype not in COMPRESSIBLE:
        return resp
    resp.vary.add("Accept-Encoding")
    if resp.status_code != 200 or "Content-Encoding" in resp.headers or not _accepts_gzip():
        return resp
    static_key = (request.path, resp.headers.get("ETag")) if resp.direct_passthrough else None
    body = _STATIC_GZ.get(static_key) if static_key else None
    if body is None:
        resp.direct_passthrough = False
        data = resp.get_data()
        if len(data) < MIN_COMPRESS:
            return resp
        body = gzip.compress(data, 9 if static_key else PAGE_LEVEL)
        if static_key and len(_STATIC_GZ) < 64:
            _STATIC_GZ[static_key] = body
    else:
        resp.direct_passthrough = False
    resp.set_data(body)
    resp.headers["Content-Encoding"] = "gzip"
    if (etag := resp.headers.get("ETag")) and not etag.startswith("W/"):
        resp.headers["ETag"] = "W/" + etag            # the same file, another encoding
    return resp


def register(app: Flask) -> None:
    app.before_request(_before)
    app.after_request(_after)

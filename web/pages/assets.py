"""The browser libraries the pages use, served by the app itself from web/node_modules (installed by
scripts/install.sh from web/package-lock.json): the dashboard needs no network."""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, abort, send_file

bp = Blueprint("assets", __name__)

NODE_MODULES = Path(__file__).resolve().parent.parent / "node_modules"
VENDOR = {"chart.umd.min.js": NODE_MODULES / "chart.js" / "dist" / "chart.umd.min.js",
          "echarts.min.js": NODE_MODULES / "echarts" / "dist" / "echarts.min.js"}


@bp.get("/static/vendor/<name>")
def vendor(name: str):
    path = VENDOR.get(name)
    if path is None:
        abort(404, description=f"no vendored file {name}")
    if not path.is_file():
        abort(503, description=f"{path} is missing: run scripts/install.sh (npm ci in web/)")
    return send_file(path, mimetype="text/javascript", max_age=86400)

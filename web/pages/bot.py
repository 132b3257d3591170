"""``/bot``: what the mailing-list bot is doing, from the store (messages read, series and their states,
mails decided, held and sent with their text) and the policy in force (``serve --bot-config``)."""
from __future__ import annotations

from flask import Blueprint, jsonify, render_template

from ci.bot.policy import load_policy
from ci.bot.status import bot_status
from db.store import Store
from web import context, params

bp = Blueprint("bot", __name__)


def _limit() -> int:
    """How many set-aside messages to list (a 400 past 1,000, never a 500)."""
    return params.int_arg("limit", 100, 0, 1000)


def bot_data(store: Store, config, limit: int = 100) -> dict:
    """``bot_status`` as data; the page and ``/api/bot`` show exactly this."""
    d = bot_status(store, load_policy(config), limit).to_dict()
    d["links"] = {"json": "/api/bot",
                  "series": {s["key"]: f"/series/{s['series_id']}" for s in d["series"] if s["series_id"]}}
    return d


@bp.get("/bot")
def page():
    data = bot_data(context.store(), context.settings().bot_config, _limit())
    return render_template("bot.html", d=data, api=data["links"]["json"])


@bp.get("/api/bot")
def api():
    return jsonify(bot_data(context.store(), context.settings().bot_config, _limit()))

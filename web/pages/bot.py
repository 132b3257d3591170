"""``/bot``: what the mailing-list bot's operator needs to see (ci.bot.status): series by state,
infrastructure failures, quarantined series and messages with their reasons, mails by state."""
from __future__ import annotations

from flask import Blueprint, jsonify, render_template

from ci.bot.status import bot_status
from web import context, params

bp = Blueprint("bot", __name__)


def _limit() -> int:
    return params.int_arg("limit", 100, 0, 1000)


@bp.get("/bot")
def page():
    return render_template("bot.html", d=bot_status(context.store(), _limit()), api="/api/bot")


@bp.get("/api/bot")
def api():
    return jsonify(bot_status(context.store(), _limit()))

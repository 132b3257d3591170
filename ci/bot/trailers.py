"""Patches as ``b4 am`` makes them: b4's own mailbox and series logic folds the trailers reviewers sent
in replies (``Reviewed-by:``, ``Acked-by:``, ``Tested-by:``...) into the patches before ``git am``.

The bot tests what a maintainer would apply: the commits it builds are the commits ``b4 am`` gives
(same author, date, message and diff, so the same shas), and the "to reproduce" block of its mails,
which starts with ``b4 am``, arrives at them again. b4 is used as a library (``b4.LoreMailbox``,
``LoreSeries.get_am_ready``); attestation checks are off (they would query DNS for DKIM keys) and
nothing is fetched: the messages come from the bot's store.

sizewatch's own assembly (ci.bot.assemble) stays for what happens between polls, which b4's
mailbox (one complete set of messages per run) has no notion of: a series waiting across polls for
its missing patches, its time-out, a newer version superseding one already tested.

Where b4 cannot serve (it finds no series of that version in the messages, or raises), the patches
are applied as posted and the reason is returned, so a series is never lost to a b4 quirk.
"""
from __future__ import annotations

import argparse
import email
import email.policy
import logging
import threading

_setup_lock = threading.Lock()
_ready = False
_OUT = email.policy.default.clone(linesep="\n", max_line_length=0)


def _b4():
    """b4, configured once for library use (its defaults plus the user's git config; no attestation)."""
    global _ready
    import b4
    with _setup_lock:
        if not _ready:
            b4.setup_config(argparse.Namespace(config={}))
            b4.MAIN_CONFIG["attestation-policy"] = "off"
            logging.getLogger("b4").setLevel(logging.ERROR)
            _ready = True
    return b4


def am_patches(thread: list[bytes], version: int) -> tuple[list[bytes] | None, str]:
    """The patches of ``version`` with the trailers of ``thread``'s replies folded in, as raw messages in
    series order; ``(None, why)`` when b4 cannot assemble them."""
    try:
        b4 = _b4()
        box = b4.LoreMailbox()
        for raw in thread:
            box.add_message(email.message_from_bytes(raw, policy=email.policy.default))
        series = box.get_series(revision=version, codereview_trailers=False)
        if series is None:
            return None, f"b4 found no v{version} series in the thread"
        msgs = series.get_am_ready(noaddtrailers=False)
    except Exception as e:                     # b4 is a third-party parser: any failure falls back
        return None, f"b4 could not assemble the series: {type(e).__name__}: {e}"
    if not msgs:
        return None, "b4 found no patches"
    return [m.as_bytes(policy=_OUT) for m in msgs], ""

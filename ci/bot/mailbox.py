"""Messages from a local mirror of a mailing list: a maildir, an mbox file, or one series file.

``parse_mail`` turns raw bytes into a ``BotMessage`` (decoded headers, the [PATCH vN n/m]
tag, thread headers, base-commit:/change-id: trailers) and classifies it: a patch, a cover
letter, a reply, anything else, the bot's own mail, or malformed. It never raises on bad
input: a message it cannot use is kept as ``malformed`` with the reason, so the bot
records it once and moves on.
"""
from __future__ import annotations

import email
import email.errors
import email.policy
import hashlib
import mailbox
import re
from email.header import decode_header, make_header
from email.message import Message
from email.utils import getaddresses
from pathlib import Path
from typing import Iterator

from analyzer.errors import InputError
from db.botstore import BotMessage
from toolchains.series import base_commit_of, patch_tag

_REPLY = re.compile(r"^\s*(re|aw|sv|antw|fwd?|wg)\s*(\[\d+\])?\s*:", re.I)
_PATCH = re.compile(r"\[[^\]]*\bPATCH\b[^\]]*\]", re.I)
_DIFF = re.compile(r"^diff --git |^--- \S[^\n]*\n\+\+\+ \S[^\n]*\n@@ ", re.M)
_CHANGE = re.compile(r"^change-id: *(\S+)\s*$", re.M)
_MSGID = re.compile(r"<[^<>\s]+>")


def norm_id(value: str | None) -> str | None:
    """A Message-ID as ``<local@domain>`` (the first one in the header), or None."""
    if not value:
        return None
    m = _MSGID.search(str(value))
    if m:
        return m.group(0)
    v = str(value).strip()
    return f"<{v}>" if v and " " not in v else None


def _clean(text: str) -> str:
    """Undeclared 8-bit header bytes (surrogate-escaped by the parser): UTF-8 if they are, else Latin-1."""
    if not any("\udc80" <= ch <= "\udcff" for ch in text):
        return text
    data = text.encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _decode(value: str) -> str:
    """A raw header value as text: RFC 2047 encoded words decoded, whatever the charset."""
    v = _clean(value)
    if "=?" in v:
        try:
            v = str(make_header(decode_header(v)))
        except (LookupError, ValueError, UnicodeError, email.errors.HeaderParseError):
            pass
    return " ".join(v.split())


def _headers(msg: Message) -> dict[str, list[str]]:
    """Raw header values by lower-case name. Read with the compat32 parser, as raw strings
    (undeclared 8-bit bytes surrogate-escaped): the default policy's structured parse costs
    several times as much, and the bot reads every message of a list."""
    out: dict[str, list[str]] = {}
    for k, v in msg.raw_items():
        out.setdefault(k.lower(), []).append(str(v))
    return out


def _header(heads: dict[str, list[str]], name: str) -> str:
    """A header decoded to text; '' when absent."""
    got = heads.get(name.lower())
    return _decode(got[0]) if got else ""


def _addresses(heads: dict[str, list[str]], name: str) -> list[str]:
    out = []
    for real, addr in getaddresses([_clean(v) for v in heads.get(name.lower(), [])]):
        if "@" in addr:
            real = _decode(real)
            out.append(f"{real} <{addr}>" if real else addr)
    return out


def body_text(raw: bytes) -> str:
    """A message's plain-text body (its commit message and diff, for a patch)."""
    return _body_text(raw)


def _body_text(raw: bytes) -> str:
    """The plain-text body (transfer encoding and charset undone); only patches need it."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        part = msg.get_body(("plain",))
        if part is not None:
            return part.get_content()
    except (KeyError, LookupError, ValueError, AssertionError, TypeError):
        pass
    head, _, body = raw.partition(b"\n\n")
    return body.decode("utf-8", "replace")


def _malformed_id(raw: bytes) -> str:
    return f"<malformed-{hashlib.sha256(raw).hexdigest()[:24]}@sizewatch.invalid>"


def parse_mail(raw: bytes, source: str = "", key: str = "", received_at: str = "",
               own_addresses: tuple[str, ...] = ()) -> BotMessage:
    """One raw message as the bot sees it (never raises)."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    except Exception as e:                      # pragma: no cover - the parser is lenient
        return BotMessage(_malformed_id(raw), "malformed", note=f"cannot parse: {e}", source=source,
                          source_key=key, received_at=received_at)
    heads = _headers(msg)
    mid = norm_id(_header(heads, "Message-ID"))
    subject = _header(heads, "Subject")
    froms = _addresses(heads, "From")
    m = BotMessage(mid or _malformed_id(raw), "other", subject, source=source, source_key=key,
                   received_at=received_at, date=_header(heads, "Date"), list_id=_header(heads, "List-Id"),
                   to=_addresses(heads, "To"), cc=_addresses(heads, "Cc"),
                   in_reply_to=norm_id(_header(heads, "In-Reply-To")),
                   references=_MSGID.findall(_header(heads, "References")))
    if froms:
        name, _, addr = froms[0].rpartition(" <")
        m.from_name, m.from_addr = (name, addr.rstrip(">")) if addr else ("", froms[0])
    problems = [h for h, ok in (("Message-ID", mid), ("From", froms), ("Subject", subject)) if not ok]
    if problems:
        m.kind, m.note = "malformed", f"no usable {'/'.join(problems)} header"
        return m
    if m.from_addr.lower() in {a.lower() for a in own_addresses}:
        m.kind = "own"
        return m
    if _REPLY.match(subject) or not _PATCH.search(subject):
        m.kind = "reply" if (_REPLY.match(subject) or m.in_reply_to) else "other"
        if m.kind == "reply":
            m.raw = raw                        # its trailers (Reviewed-by...) are folded into the patches
        return m
    pos, total, ver = patch_tag(subject)
    text = _body_text(raw)
    has_diff = _DIFF.search(text) is not None
    m.version, m.position, m.total = ver, pos, total
    if (pos is None) != (total is None) or (total is not None and (total < 1 or pos > total)):
        m.kind, m.note = "malformed", f"bad patch number in {subject!r}"
        return m
    change = _CHANGE.search(text)
    m.base_commit = base_commit_of(text)
    m.change_id = change.group(1) if change else None
    if pos == 0:
        m.kind = "cover"
    elif has_diff:
        m.kind = "patch"
        if pos is None:
            m.position, m.total = 1, 1
    else:
        m.kind, m.note = "other", "a [PATCH] subject without a diff"
        return m
    m.raw = raw
    return m


def am_ready(raw: bytes) -> bytes:
    """A patch whose body was sent base64 or quoted-printable, re-written as plain 8-bit UTF-8: git am
    decodes either, but the series reader finds patches by their diff in the raw text."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        cte = str(msg.get("Content-Transfer-Encoding", "")).strip().lower()
        if msg.is_multipart() or cte not in ("base64", "quoted-printable"):
            return raw
        text = msg.get_content()
        msg.set_content(text, charset="utf-8", cte="8bit")
        return msg.as_bytes(policy=email.policy.default.clone(linesep="\n", max_line_length=0))
    except (LookupError, ValueError, TypeError, UnicodeError):
        return raw


def check_maildir(path: Path) -> None:
    if not path.is_dir():
        raise InputError(f"{path}: no such maildir")
    if not all((path / d).is_dir() for d in ("cur", "new", "tmp")):
        raise InputError(f"{path}: not a maildir (needs cur/, new/ and tmp/)")


def check_mbox(path: Path) -> None:
    if not path.is_file():
        raise InputError(f"{path}: no such mbox file")


def read_maildir(path: Path, known: set[str] = frozenset()) -> Iterator[tuple[str, bytes]]:
    """(key, raw bytes) of every message in new/ and cur/ whose key is not in ``known``."""
    check_maildir(path)
    box = mailbox.Maildir(str(path), factory=None, create=False)
    for key in sorted(box.keys()):
        if key in known:
            continue
        try:
            yield key, box.get_bytes(key)
        except (KeyError, FileNotFoundError):    # moved or deleted by another reader meanwhile
            continue


def read_mbox(path: Path, known: set[str] = frozenset()) -> Iterator[tuple[str, bytes]]:
    """(sha256 of the message, raw bytes) of every message of an mbox file not in ``known``."""
    check_mbox(path)
    box = mailbox.mbox(str(path), create=False)
    try:
        for key in box.keys():
            raw = box.get_bytes(key)
            digest = hashlib.sha256(raw).hexdigest()
            if digest not in known:
                yield digest, raw
    finally:
        box.close()

"""Messages from a local mirror of a mailing list: a maildir, an mbox file, or one series file.

``parse_mail`` turns raw bytes into a ``BotMessage`` (decoded headers, the [PATCH vN n/m]
tag, thread headers, base-commit:/change-id: trailers) and classifies it: a patch, a cover
letter, a reply, anything else, the bot's own mail, malformed (not a mail at all) or
quarantined. It never raises on bad input: a message it cannot use is kept with the
reason, so the bot records it once and moves on, and one stranger's mail cannot stop
the list.

Quarantined (raw bytes kept for the operator, reason in ``note``, listed by
``sizewatch bot status``): a Message-ID that is empty, nested or not one ``<id>``; a
From/Subject with an encoded CR, LF or NUL or an undecodable encoded word; a
``[PATCH vN n/m]`` tag past toolchains.series' caps. Control characters (NUL, ESC, ...)
in any other decoded header are dropped, so logs, the status and the replies carry none.
"""
from __future__ import annotations

import email
import email.errors
import email.policy
import errno
import hashlib
import mailbox
import os
import re
import stat
from dataclasses import dataclass
from email.header import decode_header, make_header
from email.message import Message
from email.utils import getaddresses
from pathlib import Path
from typing import Iterator

from analyzer.errors import InputError
from db.botstore import BotMessage
from toolchains.series import TagError, base_commit_of, patch_tag

_REPLY = re.compile(r"^\s*(re|aw|sv|antw|fwd?|wg)\s*(\[\d+\])?\s*:", re.I)
_PATCH = re.compile(r"\[[^\]]*\bPATCH\b[^\]]*\]", re.I)
_DIFF = re.compile(r"^diff --git |^--- \S[^\n]*\n\+\+\+ \S[^\n]*\n@@ ", re.M)
_CHANGE = re.compile(r"^change-id: *(\S+)\s*$", re.M)
_MSGID = re.compile(r"<[^<>\s]+>")
_ONE_ID = re.compile(r"<[^<>\s]+>")                              # the whole value (fullmatch)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")      # C0 (tab aside), DEL, C1
MAX_ID = 998                                                   # RFC 5322's line length
MAX_SUBJECT = 998


def clean_text(text: str) -> str:
    """Text fit for a header, a log line or a terminal: control characters dropped, spaces folded."""
    return " ".join(_CONTROL.sub(" ", text).split())


def id_problem(value: str) -> str:
    """Why a Message-ID header's value cannot key a message ('' when it can)."""
    v = value.strip()
    if not v:
        return "empty Message-ID"
    if len(v) > MAX_ID:
        return f"Message-ID of {len(v)} characters"
    if _ONE_ID.fullmatch(v) or ("<" not in v and ">" not in v and not any(c.isspace() for c in v)):
        return ""
    return f"unusable Message-ID {v[:80]!r} (not one <id>)"


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


def _decode(value: str, problems: list[str] | None = None, name: str = "") -> str:
    """A raw header value as text: RFC 2047 encoded words decoded. What cannot be decoded (an
    unknown charset, bad base64) or decodes to CR, LF or NUL is noted in ``problems``."""
    v = _clean(value)
    if "=?" in v:
        try:
            dec = str(make_header(decode_header(v)))
        except (LookupError, ValueError, UnicodeError, AssertionError, email.errors.HeaderParseError) as e:
            if problems is not None:
                problems.append(f"undecodable {name} header ({type(e).__name__})")
        else:
            if problems is not None and any(c in dec for c in "\r\n\x00"):
                problems.append(f"{name} header with an encoded CR, LF or NUL")
            v = dec
    return clean_text(v)


def _headers(msg: Message) -> dict[str, list[str]]:
    """Raw header values by lower-case name. Read with the compat32 parser, as raw strings
    (undeclared 8-bit bytes surrogate-escaped): the default policy's structured parse costs
    several times as much, and the bot reads every message of a list."""
    out: dict[str, list[str]] = {}
    for k, v in msg.raw_items():
        out.setdefault(k.lower(), []).append(str(v))
    return out


def _header(heads: dict[str, list[str]], name: str, problems: list[str] | None = None) -> str:
    """A header decoded to text; '' when absent."""
    got = heads.get(name.lower())
    return _decode(got[0], problems, name) if got else ""


MAX_ADDRESSES = 2000            # per header: what the bot reads of a hostile To/Cc (replies cap far lower)
MAX_ADDRESS_TEXT = 32768        # characters of To/Cc parsed (~500 addresses): the stdlib's parser is slow


def _bounded(values: list[str]) -> list[str]:
    out, left = [], MAX_ADDRESS_TEXT
    for v in values:
        if left <= 0:
            break
        if len(v) > left:
            v = v[:left].rpartition(",")[0]     # whole addresses only
        out.append(v)
        left -= len(v)
    return out


def _addresses(heads: dict[str, list[str]], name: str, problems: list[str] | None = None) -> list[str]:
    out = []
    for real, addr in getaddresses(_bounded([_clean(v) for v in heads.get(name.lower(), [])])):
        if "@" in addr and not _CONTROL.search(addr) and " " not in addr:
            real = _decode(real, problems, name)
            out.append(f"{real} <{addr}>" if real else addr)
            if len(out) >= MAX_ADDRESSES:
                break
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


def malformed_id(raw: bytes) -> str:
    """An id of our own for a message whose Message-ID cannot key it (sha256 of the bytes)."""
    return f"<malformed-{hashlib.sha256(raw).hexdigest()[:24]}@sizewatch.invalid>"


def parse_mail(raw: bytes, source: str = "", key: str = "", received_at: str = "",
               own_addresses: tuple[str, ...] = ()) -> BotMessage:
    """One raw message as the bot sees it (never raises)."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    except Exception as e:                      # pragma: no cover - the parser is lenient
        return BotMessage(malformed_id(raw), "malformed", note=f"cannot parse: {e}", source=source,
                          source_key=key, received_at=received_at)
    heads = _headers(msg)
    bad: list[str] = []                            # reasons to quarantine
    raw_id = _header(heads, "Message-ID")
    why = id_problem(raw_id) if "message-id" in heads else ""
    if why:
        bad.append(why)
    mid = None if why else norm_id(raw_id)
    subject = _header(heads, "Subject", bad)
    if len(subject) > MAX_SUBJECT:             # the stdlib's header parsing is slow on these when replying
        bad.append(f"Subject of {len(subject)} characters")
        subject = subject[:MAX_SUBJECT]
    froms = _addresses(heads, "From", bad)
    m = BotMessage(mid or malformed_id(raw), "other", subject, source=source, source_key=key,
                   received_at=received_at, date=_header(heads, "Date"), list_id=_header(heads, "List-Id"),
                   to=_addresses(heads, "To"), cc=_addresses(heads, "Cc"),
                   in_reply_to=norm_id(_header(heads, "In-Reply-To")),
                   references=_MSGID.findall(_header(heads, "References")))
    if froms:
        name, _, addr = froms[0].rpartition(" <")
        m.from_name, m.from_addr = (name, addr.rstrip(">")) if addr else ("", froms[0])
    problems = [h for h, ok in (("Message-ID", mid or why), ("From", froms), ("Subject", subject)) if not ok]
    if problems:
        m.kind, m.note = "malformed", f"no usable {'/'.join(problems)} header"
        return m

    if m.from_addr.lower() in {a.lower() for a in own_addresses}:
        m.kind = "own"
        return m
    if _REPLY.match(subject) or not _PATCH.search(subject):
        m.kind = "reply" if (_REPLY.match(subject) or m.in_reply_to) else "other"
        m.note = "; ".join(dict.fromkeys(bad))
        if m.kind == "reply":
            m.raw = raw                        # its trailers (Reviewed-by...) are folded into the patches
        return m
    try:                                       # a patch or cover letter: it must be usable whole
        pos, total, ver = patch_tag(subject)
    except TagError as e:
        bad.append(str(e))
    if bad:
        return quarantine(m, "; ".join(dict.fromkeys(bad)), raw)
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


def content_key(m: BotMessage) -> tuple:
    """What makes two messages under one Message-ID the same message: its kind, sender, subject
    and (for patches and cover letters) its body; delivery headers (Received:, list footers in
    the header) may differ between two copies of one mail."""
    body = m.raw.partition(b"\n\n")[2] if m.raw else b""
    return (m.kind, m.from_addr.lower(), m.subject, hashlib.sha256(body).hexdigest() if body else "")


def quarantine(m: BotMessage, reason: str, raw: bytes) -> BotMessage:
    """Set a message aside: kept whole (for the operator), never assembled into a series."""
    m.kind, m.note, m.raw = "quarantined", reason, raw
    m.version = m.position = m.total = None
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
    """A one-line error for what cannot be an mbox, naming what it is instead."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such mbox file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read the mbox: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else f"not a regular file ({stat.filemode(st.st_mode)[0]})"
        raise InputError(f"{path}: not an mbox file: {what}")


MAX_MESSAGE = 32 << 20          # bytes: far past any list's limit; bigger ones are set aside unread


@dataclass(frozen=True)
class Unreadable:
    """An entry the bot will not read whole, set aside (quarantined) with the reason: in a maildir, not a
    regular file (a FIFO would block the bot forever), unreadable, or over MAX_MESSAGE; in a public-inbox
    epoch, a commit whose ``m`` is not a blob within MAX_MESSAGE. ``head`` is what was read of it, for the
    operator."""
    reason: str
    head: bytes = b""


@dataclass(frozen=True)
class NoMessage:
    """An entry that holds no message and never will (a public-inbox commit removing one, an empty ``m``):
    recorded as read so that it is not walked again, but nothing to set aside: there is nothing to look at."""
    reason: str


def _read_entry(path: str) -> bytes | Unreadable:
    """A message file's bytes, opened without blocking and only if it is a regular file of sane size."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Unreadable(f"not a regular file ({stat.filemode(st.st_mode)[0]}) in the maildir")
        if st.st_size > MAX_MESSAGE:
            return Unreadable(f"a message of {st.st_size} bytes, over the {MAX_MESSAGE >> 20} MiB cap",
                              os.pread(fd, 65536, 0))
        chunks, left = [], st.st_size + 1      # a file growing meanwhile is read up to its size when opened
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_maildir(path: Path, known: set[str] = frozenset()) -> Iterator[tuple[str, bytes | Unreadable]]:
    """(key, raw bytes) of every message in new/ and cur/ whose key is not in ``known`` (keys as
    ``mailbox.Maildir`` makes them: the file name up to its ``:2,`` info); entries that must not be
    read whole come as ``Unreadable``."""
    check_maildir(path)
    entries: dict[str, str] = {}
    for sub in ("new", "cur"):
        with os.scandir(path / sub) as it:
            for e in it:
                if not e.name.startswith("."):
                    entries.setdefault(e.name.split(":", 1)[0], e.path)
    for key in sorted(entries):
        if key in known:
            continue
        try:
            yield key, _read_entry(entries[key])
        except FileNotFoundError:                # moved (new/ -> cur/) or deleted by another reader meanwhile
            continue
        except OSError as e:                     # a symlink (O_NOFOLLOW), no permission, an I/O error
            if e.errno == errno.ELOOP and os.path.islink(entries[key]):
                yield key, Unreadable("a symbolic link in the maildir: not followed, not read")
            else:
                yield key, Unreadable(f"cannot read it: {e.strerror or e}")


def mbox_has_messages(path: Path) -> bool:
    """Does the mbox hold at least one message (a ``From `` line starting the file or a line)?"""
    box = mailbox.mbox(str(path), create=False)
    try:
        return next(iter(box.iterkeys()), None) is not None
    finally:
        box.close()


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

"""Where the bot's mails go: an SMTP relay (smtplib; STARTTLS or implicit TLS, optional
login) or an outbox mbox a human reviews before anything reaches the list.

Idempotency, honestly: the outbox is local, so ``OutboxTransport.send`` looks for the
Message-ID in the file (under the mbox lock) and appends only when it is not there; a
crash after the append and before the store marks the mail sent leaves no duplicate.
SMTP cannot be asked whether a message was already delivered: a crash between the
server's answer to DATA and the store's commit sends the mail again on the next run.
The Message-ID is the same (it was fixed when the decision was recorded), so mail
clients and list archives that deduplicate on it show one message.

Credentials are taken from the settings (or the environment) when connecting and never
appear in an error, a log line or the store.
"""
from __future__ import annotations

import mailbox
import os
import re
import smtplib
import socket
import ssl
import time
from pathlib import Path
from typing import Protocol

from analyzer.errors import SizewatchError
from ci.bot.policy import SmtpSettings
from db.botstore import BotMail


class SendError(SizewatchError):
    """A mail could not be handed over; the message is one line, without credentials."""


class Transport(Protocol):
    label: str

    def send(self, mail: BotMail, sender: str) -> None: ...

    def close(self) -> None: ...


_MSGID = re.compile(rb"^Message-ID:\s*(<[^>]+>)", re.I | re.M)


class OutboxTransport:
    """Append to an mbox file (created if missing), once per Message-ID."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.label = f"outbox {self.path}"
        if self.path.is_dir():
            raise SendError(f"{self.path}: is a directory, not an outbox mbox file")
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _present(self, box: mailbox.mbox) -> set[bytes]:
        out = set()
        for key in box.keys():
            head = box.get_bytes(key).split(b"\n\n", 1)[0]
            m = _MSGID.search(head)
            if m:
                out.add(m.group(1))
        return out

    def send(self, mail: BotMail, sender: str) -> None:
        try:
            box = mailbox.mbox(str(self.path), create=True)
            box.lock()
            try:
                if mail.message_id.encode() not in self._present(box):
                    stamp = time.asctime(time.gmtime())
                    box.add(f"From {sender} {stamp}\n".encode() + mail.raw)     # the bytes as decided
                    box.flush()
                    with open(self.path, "rb") as f:
                        os.fsync(f.fileno())
            finally:
                box.unlock()
                box.close()
        except (OSError, mailbox.Error) as e:
            raise SendError(f"{self.path}: cannot write the outbox ({e})") from None

    def close(self) -> None:
        pass


def _crlf(raw: bytes) -> bytes:
    return raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


class SmtpTransport:
    """One connection per bot run, opened at the first mail."""

    def __init__(self, settings: SmtpSettings):
        self.settings = settings
        self.label = settings.label
        self._conn: smtplib.SMTP | None = None

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.settings.ca_file or None)
        return ctx

    def _connect(self) -> smtplib.SMTP:
        s = self.settings
        try:
            if s.ssl:
                conn: smtplib.SMTP = smtplib.SMTP_SSL(s.host, s.port, timeout=s.timeout, context=self._context())
            else:
                conn = smtplib.SMTP(s.host, s.port, timeout=s.timeout)
            conn.ehlo()
            if s.starttls and not s.ssl:
                if not conn.has_extn("starttls"):
                    conn.close()
                    raise SendError(f"{self.label}: the server does not offer STARTTLS (set starttls = false "
                                    "to send in the clear)")
                conn.starttls(context=self._context())
                conn.ehlo()
            if s.username:
                secret = s.secret()
                if not secret:
                    conn.close()
                    raise SendError(f"{self.label}: username {s.username!r} but no password "
                                    f"(set [smtp] password or ${s.password_env})")
                conn.login(s.username, secret)
        except smtplib.SMTPAuthenticationError as e:
            raise SendError(f"{self.label}: login as {s.username!r} refused ({e.smtp_code})") from None
        except smtplib.SMTPNotSupportedError:
            hint = "" if s.starttls or s.ssl else " before TLS (set starttls = true?)"
            raise SendError(f"{self.label}: the server offers no login (AUTH){hint}") from None
        except (smtplib.SMTPException, ssl.SSLError, OSError) as e:
            raise SendError(f"{self.label}: {_why(e)}") from None
        return conn

    def send(self, mail: BotMail, sender: str) -> None:
        if self._conn is None:
            self._conn = self._connect()
        raw = _crlf(mail.raw)
        opts = ["BODY=8BITMIME"] if not raw.isascii() and self._conn.has_extn("8bitmime") else []
        try:
            refused = self._conn.sendmail(sender, mail.recipients, raw, mail_options=opts)
        except smtplib.SMTPRecipientsRefused as e:
            raise SendError(f"{self.label}: every recipient refused: {', '.join(e.recipients)}") from None
        except (smtplib.SMTPException, OSError) as e:
            self.close()
            raise SendError(f"{self.label}: {_why(e)}") from None
        del refused        # some recipients refused: the others got it, which is what a list reply needs

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.quit()
            except (smtplib.SMTPException, OSError):
                pass
            self._conn = None


def _why(e: BaseException) -> str:
    if isinstance(e, smtplib.SMTPResponseException):
        text = e.smtp_error.decode("utf-8", "replace") if isinstance(e.smtp_error, bytes) else str(e.smtp_error)
        return f"{e.smtp_code} {' '.join(text.split())}"
    if isinstance(e, socket.timeout):
        return "timed out"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    return " ".join(str(e).split()) or type(e).__name__

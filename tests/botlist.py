"""The mailing list as the bot's tests see it: the examples/ series re-sent the way git
send-email delivers it to linux-mm (cover letter first, patches threaded under it), a v2, a
review reply, a series that does not apply (from a sender whose name is ISO-8859-1), a
malformed message, an incomplete series, and a real SMTP server on 127.0.0.1 (aiosmtpd)
collecting what the bot sends.
"""
from __future__ import annotations

import contextlib
import email
import email.policy
import mailbox
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "toolchains" / "examples" / "rmqueue-always-inline.mbox"
COVER = ROOT / "toolchains" / "examples" / "rmqueue-always-inline.cover-letter.eml"
BASE = "624c6bb3bc79aa6ce98943c44440da1d9528d236"
LIST = "linux-mm@kvack.org"
BOT = "sizewatch-bot@example.org"
SENDER = "Aaron Lu <aaron.lu@intel.com>"
COVER_ID = "<cover.1795333549.git.sizewatch@localhost>"
V2_COVER_ID = "<20261201093000.4242-1-aaron.lu@intel.com>"


def _example_parts() -> tuple[bytes, bytes, bytes]:
    box = mailbox.mbox(str(EXAMPLE), create=False)
    p1, p2 = (box.get_bytes(k) for k in box.keys())
    cbox = mailbox.mbox(str(COVER), create=False)
    (cover,) = (cbox.get_bytes(k) for k in cbox.keys())
    return cover, p1, p2


def _set_header(raw: bytes, name: str, value: str | None) -> bytes:
    """Replace (or add, or with None drop) one header, folded continuation lines included."""
    head, sep, body = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    out, skip = [], False
    for ln in lines:
        if skip and ln[:1] in (b" ", b"\t"):
            continue
        skip = ln.lower().startswith(name.lower().encode() + b":")
        if not skip:
            out.append(ln)
    if value is not None:
        out.append(f"{name}: {value}".encode())
    return b"\n".join(out) + sep + body


def _as_sent(raw: bytes, **headers: str | None) -> bytes:
    for k, v in headers.items():
        raw = _set_header(raw, k.replace("_", "-"), v)
    return raw


def series_v1() -> list[bytes]:
    """Cover letter and both patches as they reach the list (send-email: From is the sender, the
    author of patch 1 moves into the body; patches reply to the cover letter)."""
    cover, p1, p2 = _example_parts()
    common = {"To": LIST, "List_Id": "<linux-mm.kvack.org>"}
    cover = _as_sent(cover, From=SENDER, **common)
    head, _, body = p1.partition(b"\n\n")
    p1 = head + b"\n\nFrom: sizewatch examples <sizewatch@localhost>\n\n" + body     # the real author, in the body
    p1 = _as_sent(p1, From=SENDER, In_Reply_To=COVER_ID, References=COVER_ID, **common)
    p2 = _as_sent(p2, In_Reply_To=COVER_ID, References=COVER_ID, **common)
    return [cover, p1, p2]


V2_NOTE = b"Changes in v2:\n- leave __rmqueue_fallback() to the compiler\n\n"


def series_v2() -> list[bytes]:
    """v2: patch 2 no longer forces __rmqueue_fallback() inline (a small code change); posted in reply
    to the v1 cover letter, as git send-email --in-reply-to does."""
    cover, p1, p2 = series_v1()
    refs = f"{COVER_ID} {V2_COVER_ID}"
    cover = _as_sent(cover.replace(b"[PATCH 0/2]", b"[PATCH v2 0/2]"), Message_Id=V2_COVER_ID,
                     In_Reply_To=COVER_ID, References=COVER_ID)
    p1 = _as_sent(p1.replace(b"[PATCH 1/2]", b"[PATCH v2 1/2]"),
                  Message_Id="<20261201093000.4242-2-aaron.lu@intel.com>", In_Reply_To=V2_COVER_ID, References=refs)
    p2 = p2.replace(b"[PATCH 2/2]", b"[PATCH v2 2/2]")
    hunk = (b"@@ -3029,7 +3029,7 @@ static bool unreserve_highatomic_pageblock(const struct alloc_context *ac,\n"
            b"  * deviation from the rest of this file, to make the for loop\n"
            b"  * condition simpler.\n"
            b"  */\n"
            b"-static inline bool\n"
            b"+static __always_inline bool\n"
            b" __rmqueue_fallback(struct zone *zone, int order, int start_migratetype,\n"
            b" \t\t\t\t\t\tunsigned int alloc_flags)\n"
            b" {\n")
    assert hunk in p2, "the example's patch 2 changed: update tests/botlist.py"
    p2 = p2.replace(hunk, b"").replace(b" mm/page_alloc.c | 8 ++++----\n 1 file changed, 4 insertions(+), 4 deletions(-)",
                                       b" mm/page_alloc.c | 6 +++---\n 1 file changed, 3 insertions(+), 3 deletions(-)")
    p2 = p2.replace(b"Signed-off-by: Aaron Lu <aaron.lu@intel.com>\n---\n",
                    b"Signed-off-by: Aaron Lu <aaron.lu@intel.com>\n---\n" + V2_NOTE)
    p2 = _as_sent(p2, Message_Id="<20261201093000.4242-3-aaron.lu@intel.com>", In_Reply_To=V2_COVER_ID,
                  References=refs)
    return [cover, p1, p2]


def review_reply() -> bytes:
    return (f"From: Vlastimil Babka <vbabka@suse.cz>\nTo: {SENDER}\nCc: {LIST}\n"
            "Subject: Re: [PATCH 2/2] mm/page_alloc: make sure __rmqueue() etc. always inline\n"
            "Date: Tue, 24 Nov 2026 07:32:13 +0100\n"
            "Message-Id: <d87adccc-75c4-765c@suse.cz>\n"
            "In-Reply-To: <8bf3e50fb0329dce2e765e10545afdd526cd998a.1795333580.git.sizewatch@localhost>\n"
            f"References: {COVER_ID}\n <8bf3e50fb0329dce2e765e10545afdd526cd998a.1795333580.git.sizewatch@localhost>\n"
            "List-Id: <linux-mm.kvack.org>\n\n"
            "On 11/22/26 08:00, Aaron Lu wrote:\n> __rmqueue(), __rmqueue_fallback(), __rmqueue_smallest() and\n"
            "> __rmqueue_cma_fallback() are all in page allocator's hot path\n\n"
            "Can't argue with your numbers against this patch.\n\n"
            "Reviewed-by: Vlastimil Babka <vbabka@suse.cz>\n").encode()


def not_applying(msgid: str = "<20261123101500.777-1-jose@example.org>", name: str = "José Müller",
                 addr: str = "jose@example.org", subject: str = "[PATCH] mm/page_alloc: tidy __rmqueue_smallest()",
                 to: str = LIST, charset: str = "iso-8859-1", in_reply_to: str | None = None) -> bytes:
    """A one-patch series whose context is not in linux-6.1 (git am rejects it), From and body in ``charset``."""
    from email.header import Header
    enc = Header(name, charset).encode() if charset != "us-ascii" else name
    body = (f"Tidy up the comment above __rmqueue_smallest(), as {name} noted.\n\n"
            f"Signed-off-by: {name} <{addr}>\n---\n mm/page_alloc.c | 2 +-\n 1 file changed, 1 insertion(+), "
            "1 deletion(-)\n\ndiff --git a/mm/page_alloc.c b/mm/page_alloc.c\nindex 85b189b..0000001 100644\n"
            "--- a/mm/page_alloc.c\n+++ b/mm/page_alloc.c\n@@ -2582,5 +2582,5 @@ static void prep_new_page(struct "
            "page *page, unsigned int order, gfp_t gfp_flags\n"
            "  * Go through the free lists for the given migratetype and remove\n"
            "- * the smallest available page from the freelists (NOT IN THE TREE)\n"
            "+ * the smallest available page from the free lists\n"
            "  */\n static __always_inline\n struct page *__rmqueue_smallest(struct zone *zone, unsigned int order,\n"
            f"-- \n2.39.5\n\nbase-commit: {BASE}\n")
    head = (f"From: {enc} <{addr}>\nTo: {to}\nSubject: {subject}\nDate: Mon, 23 Nov 2026 10:15:00 +0100\n"
            f"Message-Id: {msgid}\nMIME-Version: 1.0\nContent-Type: text/plain; charset={charset}\n"
            "Content-Transfer-Encoding: 8bit\n")
    if in_reply_to:
        head += f"In-Reply-To: {in_reply_to}\nReferences: {in_reply_to}\n"
    return (head + "\n" + body).encode(charset)


def incomplete_first(msgid: str = "<20261123120000.555-2-kim@example.org>") -> bytes:
    """Patch 1 of a 3-patch series whose patches 2 and 3 never arrive (the cover letter neither)."""
    return (f"From: Kim Lee <kim@example.org>\nTo: {LIST}\nSubject: [PATCH 1/3] mm/page_alloc: a first step\n"
            "Date: Mon, 23 Nov 2026 12:00:00 +0100\n"
            f"Message-Id: {msgid}\nIn-Reply-To: <20261123120000.555-1-kim@example.org>\n"
            "References: <20261123120000.555-1-kim@example.org>\n\n"
            "A first step.\n\nSigned-off-by: Kim Lee <kim@example.org>\n---\n"
            "diff --git a/mm/page_alloc.c b/mm/page_alloc.c\n--- a/mm/page_alloc.c\n+++ b/mm/page_alloc.c\n"
            "@@ -1,1 +1,1 @@\n-x\n+y\n").encode()


VARARGS_ID = "<20261123140000.999-1-dana@example.org>"


def varargs_patch() -> bytes:
    """A patch that builds with clang-19 but not with gcc-12: an __always_inline varargs helper
    (gcc: "can never be inlined because it uses variable argument lists"; clang keeps an
    out-of-line copy, an always_inline_copy finding)."""
    import difflib
    from toolchains.git import git
    from toolchains.source import ensure_source
    old = git(ensure_source("6.1").path, "show", f"{BASE}:mm/page_alloc.c").splitlines(keepends=True)
    at = old.index("unsigned long __get_free_pages(gfp_t gfp_mask, unsigned int order)\n")
    helper = ["static __always_inline int sizewatch_sum(int n, ...)\n", "{\n", "\tva_list ap;\n", "\tint s = 0;\n",
              "\n", "\tva_start(ap, n);\n", "\twhile (n--)\n", "\t\ts += va_arg(ap, int);\n", "\tva_end(ap);\n",
              "\treturn s;\n", "}\n", "\n"]
    new = old[:at] + helper + old[at:]
    check = new.index("\tif (!page)\n", at + len(helper))
    new[check] = "\tif (!page || sizewatch_sum(1, (int)order) < 0)\n"
    diff = "".join(difflib.unified_diff(old, new, "a/mm/page_alloc.c", "b/mm/page_alloc.c", n=3))
    return ("From: Dana Byte <dana@example.org>\nTo: linux-mm@kvack.org\n"
            "Subject: [PATCH] mm/page_alloc: check __get_free_pages() orders with a varargs helper\n"
            f"Date: Mon, 23 Nov 2026 14:00:00 +0100\nMessage-Id: {VARARGS_ID}\n\n"
            "Route the order check of __get_free_pages() through a small helper.\n\n"
            "Signed-off-by: Dana Byte <dana@example.org>\n---\n"
            f"{diff}-- \n2.39.5\n\nbase-commit: {BASE}\n").encode()


MALFORMED = b"\xff\xfe garbage that is not a mail at all \x00\x01\n\nno headers here\n"


def deliver(maildir: Path, *raws: bytes) -> None:
    """Drop messages into a maildir as a delivery agent would (new/)."""
    box = mailbox.Maildir(str(maildir), create=True)
    for raw in raws:
        box.add(raw)
    box.close()


def append_mbox(path: Path, *raws: bytes) -> None:
    box = mailbox.mbox(str(path), create=True)
    box.lock()
    for raw in raws:
        box.add(b"From list-mirror Mon Nov 23 10:00:00 2026\n" + raw)
    box.flush()
    box.unlock()
    box.close()


# --- a real SMTP server on loopback -----------------------------------------------------------------

@contextlib.contextmanager
def refused_port():
    """A loopback port that refuses connections for the block's duration: bound (so no other
    process on the machine can take it) but not listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _controller_class():
    from aiosmtpd.controller import Controller

    class PortZeroController(Controller):
        """aiosmtpd's controller bound to port 0: the kernel picks a free port at bind time (no
        window in which another process can take it); the port is read back from the socket."""

        def _trigger_server(self):
            if not self.port:
                self.port = self.server.sockets[0].getsockname()[1]
            super()._trigger_server()
    return PortZeroController


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    tls: bool
    login: str | None

    @property
    def message(self) -> email.message.EmailMessage:
        """As a mail store keeps it: SMTP's CRLF line ends as LF."""
        return email.message_from_bytes(self.data.replace(b"\r\n", b"\n"), policy=email.policy.default)


class SmtpServer:
    """aiosmtpd on 127.0.0.1 in a thread; optionally STARTTLS (required) and AUTH."""

    def __init__(self, tls: ssl.SSLContext | None = None, users: dict[str, str] | None = None):
        from aiosmtpd.smtp import AuthResult, LoginPassword
        self.received: list[Received] = []
        self.lock = threading.Lock()
        outer = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else None
                with outer.lock:
                    outer.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos),
                                                   envelope.original_content or envelope.content,
                                                   session.ssl is not None, login))
                return "250 OK queued"

        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = (isinstance(auth_data, LoginPassword) and users is not None
                  and users.get(auth_data.login.decode()) == auth_data.password.decode())
            return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

        kwargs: dict = {}
        if tls is not None:
            kwargs.update(tls_context=tls, require_starttls=True)
        if users is not None:
            kwargs.update(authenticator=authenticator, auth_require_tls=tls is not None)
        self.controller = _controller_class()(Handler(), hostname="127.0.0.1", port=0, **kwargs)

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        assert self.controller.port, "the server is not started"
        return self.controller.port

    def __enter__(self) -> "SmtpServer":
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()

    def messages(self) -> list[Received]:
        with self.lock:
            return list(self.received)

    def wait(self, n: int, timeout: float = 10) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.messages()) < n:
            time.sleep(0.05)
        return self.messages()


def bot_config(path: Path, smtp_port: int | None = None, **bot: object) -> Path:
    """A bot config for the tests: the example's list, gcc-12 and clang-19, growth over 1 KiB flagged."""
    def toml(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(toml(x) for x in v) + "]"
        if isinstance(v, (int, float)):
            return str(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    settings = {"address": BOT, "dashboard_url": "http://127.0.0.1:5000", "toolchains": ["gcc-12", "clang-19"],
                "incomplete_timeout": "1h", **bot}
    watch = settings.pop("watch", {"lists": [LIST], "opt_out": ["nomail@example.org"]})
    report = settings.pop("report", {"growth_bytes": 1024})
    smtp = settings.pop("smtp", {"host": "127.0.0.1", "port": smtp_port, "starttls": False} if smtp_port else None)
    lines = ["[bot]"] + [f"{k} = {toml(v)}" for k, v in settings.items()]
    lines += ["", "[watch]"] + [f"{k} = {toml(v)}" for k, v in watch.items()]
    lines += ["", "[report]"] + [f"{k} = {toml(v)}" for k, v in report.items()]
    if smtp:
        lines += ["", "[smtp]"] + [f"{k} = {toml(v)}" for k, v in smtp.items()]
    path.write_text("\n".join(lines) + "\n")
    return path

"""The bot's replies: plain-text mails in the shape kernel developers know from the kernel
test robot, threaded under the patch they are about.

Every body line is at most 78 columns (the report blocks come from ``ci.reports.mail``);
tables are cut at ``max_table_rows`` with a pointer to the dashboard. Nothing is quoted
(no top-posting, no quote to trim).
Recipients are the original's From (To:) and its To + Cc (Cc:), minus the bot, capped: the
watched lists it was sent to plus at most ``max_cc`` (default 20) other addresses, in the
order the original named them. A hostile mail with 5,000 Cc gets a reply to its author, the
list and 20 others. Names and subjects are taken without control characters (NUL, CR, LF,
ESC), and addresses are written as structured headers, so nothing a sender writes can add
a header or a recipient.

The Message-ID is derived from the decision (series version, finding set) and the mail
replied to, and the message bytes are fixed when the decision is recorded, so a resend
after a crash is the same message and receivers can drop the duplicate.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import EmailPolicy
from email.utils import format_datetime, getaddresses

from ci.bot.policy import Policy
from ci.reports.mail import (WIDTH, findings_block, fit, inline_block, para, reasons_block, runtime_block,
                              size_block, table_lines)
from ci.reports.model import PatchReport, Reportable, tree_relative
from db.botstore import BotMessage
from toolchains.kbuild import Config


class _MailPolicy(EmailPolicy):
    """The stdlib folds an over-long Subject or In-Reply-To by moving all of it to a continuation
    line, which readers then show with a leading space; fold between words instead, keeping the
    first word on the header's line (a Message-ID longer than a line stays whole, as git
    send-email writes it)."""

    WORDY = ("subject", "in-reply-to", "references", "message-id")

    def _words(self, name: str, value: str) -> str | None:
        words = value.split()
        if name.lower() not in self.WORDY or not value.isascii() or not words:
            return None
        lines = [f"{name}: {words[0]}"]
        for w in words[1:]:
            if len(lines[-1]) + 1 + len(w) <= self.max_line_length:
                lines[-1] += " " + w
            else:
                lines.append(" " + w)
        return self.linesep.join(lines) + self.linesep

    def fold(self, name, value):
        return self._words(name, str(value)) or super().fold(name, value)

    def fold_binary(self, name, value):
        got = self._words(name, str(value))
        return got.encode("ascii") if got else super().fold_binary(name, value)


POLICY = _MailPolicy().clone(max_line_length=WIDTH, linesep="\n")
FIELD = 15                                    # "patch subject: " — the robot's field column


@dataclass
class Outgoing:
    message_id: str
    in_reply_to: str
    subject: str
    recipients: list[str]                     # envelope addresses
    raw: bytes
    position: int | None = None               # the patch it is about; None: the series


@dataclass
class TestContext:
    """What was tested, for the 'what was tested' block and the reproduce commands."""
    tree: str                                 # the store's tree name, e.g. linux-6.1
    tree_spec: str                            # what --tree takes, e.g. 6.1
    base_sha: str
    base_note: str                            # why this base
    series_id: int | None
    toolchains: list[tuple[str, str]]         # (name, exact version line)
    targets: list[str]
    config: Config


# --- text helpers ---------------------------------------------------------------------------

def field_lines(name: str, value: str) -> list[str]:
    """``name:`` then the value in the robot's column, wrapped under itself."""
    label = f"{name}:".ljust(FIELD - 1) + " "
    if len(label) + len(value) <= WIDTH or " " in value:
        return para(value, " " * FIELD, label)
    return [label.rstrip(), value]            # one long token (a Message-ID, a URL): alone on the next line


def greeting(m: BotMessage) -> str:
    name = _clean(m.from_name).strip('"')
    if "," in name:                           # "Lu, Aaron"
        name = name.split(",", 1)[1].strip()
    first = name.split()[0] if name.split() else ""
    return f"Hi {first}," if first and "@" not in first else "Hello,"


def config_text(c: Config) -> str:
    parts = []
    for line in c.fragment:
        m = re.match(r"^# (CONFIG_\w+) is not set$", line.strip())
        parts.append(f"{m.group(1)}=n" if m else line.strip())
    text = f"{c.arch} {c.base}" + (f" + {' '.join(p.removeprefix('CONFIG_') for p in parts)}" if parts else "")
    return f"{c.name}: {text}" if c.name else text


def compiler_text(name: str, version: str) -> str:
    return version if version.startswith(name) else f"{name}: {version}"


def config_flags(c: Config) -> list[str]:
    """``sizewatch run``'s options for the config the bot built: ``--config NAME`` for a named config
    other than defconfig, ``--arch ARCH`` off x86_64, ``--lto thin`` (``toolchains.flavour.run_flags``)."""
    from toolchains.flavour import run_flags
    got = run_flags(c.key)
    if got is not None:
        return got
    return ([] if c.arch == "x86_64" else ["--arch", c.arch]) + (["--lto", c.lto] if c.lto else [])


def short(sha: str | None) -> str:
    return (sha or "")[:12]


# --- the parts of a findings mail ------------------------------------------------------------

def tested_block(ctx: TestContext, policy: Policy, original: BotMessage, p: PatchReport | None) -> list[str]:
    out: list[str] = []
    out += field_lines("tree", ctx.tree)
    out += field_lines("base", f"{ctx.base_sha} ({ctx.base_note})")
    out += field_lines("patch link", original.message_id)
    out += field_lines("patch subject", original.subject)
    if p is not None and p.commit is not None:
        out += field_lines("commit", f"{short(p.commit.sha)} as applied by git am "
                                     f"(parent {short(p.commit.parent_sha)})")
    out += field_lines("config", f"{config_text(ctx.config)} ({ctx.config.key})")
    out += field_lines("target", ", ".join(ctx.targets))
    for name, version in ctx.toolchains:
        out += field_lines("compiler", compiler_text(name, version))
    if p is not None and p.commit is not None:
        out += field_lines("dashboard", f"{policy.dashboard_url}/commit/{p.commit.sha}")
    if ctx.series_id is not None:
        out += field_lines("series", f"{policy.dashboard_url}/series/{ctx.series_id}")
    return out


def reproduce_block(ctx: TestContext, head: BotMessage, commit_sha: str | None, toolchains: list[str],
                    measured: bool = False) -> list[str]:
    """b4 fetches the whole series from any of its Message-IDs, with the reviewers' trailers folded in as
    the bot folded them (ci.bot.trailers), so ``sizewatch run`` builds the same commits the bot did."""
    mid = head.message_id.strip("<>")
    fetch = f"  b4 am -o - {mid} > series.mbx"
    out: list[str] = []
    if len(fetch) <= WIDTH:
        out.append(fetch)
    else:                                     # a shell continuation keeps it one command, as printed
        out += ["  b4 am -o - \\", f"      {mid} \\", "      > series.mbx"]
    out.append(f"  sizewatch run --tree {ctx.tree_spec} --series series.mbx --base {short(ctx.base_sha)} \\")
    line = f"      --toolchains {','.join(toolchains)} --targets {','.join(ctx.targets)}"
    flags = config_flags(ctx.config)
    if flags:                                 # the config, arch and LTO mode the bot built: on a line of their own
        out += [line + " \\", "      " + " ".join(flags) + (" --measure" if measured else "")]
    else:
        out.append(line + (" --measure" if measured else ""))
    if commit_sha:
        out.append(f"  sizewatch report {short(commit_sha)} --toolchains {','.join(toolchains)}")
    return out


def signature(policy: Policy) -> list[str]:
    return ["-- ", "sizewatch bot: code size and inlining, patch by patch",
            *para(f"{policy.dashboard_url}  (to stop these mails, reply and ask to be left out)")]


def findings_body(original: BotMessage, p: PatchReport, items: list[Reportable],
                  ctx: TestContext, policy: Policy, justified: tuple[str, str, int] | None = None) -> str:
    """The mail about one patch's findings; ``justified``: (trailer, its value, findings silenced) when the
    patch carries the list's justification trailer."""
    names = {r.toolchain for r in items}
    affected = [t for t in p.toolchains if t.toolchain in names]
    n = len(ctx.toolchains)
    out = [greeting(original), ""]
    measured = any(t.runtime is not None for t in p.toolchains)
    out += para(f"sizewatch built this patch with {n} compiler{'s' if n != 1 else ''} and compared code size "
                f"and inlining with its parent commit"
                + (", and counted the page allocator's executed instructions under emulation" if measured else "")
                + ". It noticed the following:")
    out.append("")
    out += para(f"[sizewatch test on {ctx.tree} {short(ctx.base_sha)}, {', '.join(ctx.targets)}]")
    out.append("")
    out += tested_block(ctx, policy, original, p)
    out.append("")
    out += para("If you fix the issue in a new version of the patch, sizewatch tests that version too; "
                "there is no tag to add.")
    out.append("")
    out.append("Findings against the parent commit (flagged ones prefixed by >>):")
    out.append("")
    out += findings_block(p, items, affected)
    shrunk = [t for t in p.toolchains if t.tables and t.tables[0].net < 0] if policy.report.shrinks_note else []
    if shrunk:
        out += para("Good news: this patch shrinks " + ", ".join(
            f"{t.target} by {-t.tables[0].net} bytes under {t.toolchain}" for t in shrunk) + ".")
        out.append("")
    if justified:
        name, value, n = justified
        out += para(f"Not flagged: {n} growth finding{'s' if n != 1 else ''} of this patch, justified by "
                    f"its {name}: {value}")
        out.append("")
    url = f"{policy.dashboard_url}/commit/{p.commit.sha}" if p.commit else policy.dashboard_url
    for t in affected:
        if t.tables:
            out.append(f"bloat-o-meter, {t.toolchain}, {t.target} (parent -> this patch):")
            out.append("")
            out += table_lines(t, policy.max_table_rows, url)
            out.append("")
            out += size_block(t)
        elif t.status != "ok":
            out.append(f"{t.toolchain} build errors ({t.target}):")
            out.append("")
            for e in (t.errors or [f"build {t.status}"])[:10]:
                out += para(tree_relative(e), "    ", "")
            out.append("")
        out += inline_block(t, items, policy.max_table_rows, url)
    for t in p.toolchains:                    # measured: every compiler's table, flagged or not
        out += runtime_block(t, url)
    reasons = reasons_block(items, affected)
    if reasons:
        out.append("The compilers' reasons:")
        out.append("")
        out += reasons + [""]
    out.append("To reproduce:")
    out.append("")
    out += reproduce_block(ctx, original, p.commit.sha if p.commit else None,
                           [t.toolchain for t in affected] or [name for name, _ in ctx.toolchains], measured)
    out.append("")
    out += signature(policy)
    return "\n".join(fit(out)) + "\n"


def not_applied_body(original: BotMessage, failed_position: int, total: int, error: str, ctx: TestContext,
                     policy: Policy, failed_subject: str) -> str:
    out = [greeting(original), ""]
    which = f"patch {failed_position}/{total}" if total > 1 else "the patch"
    out += para(f"sizewatch could not test this series: {which} does not apply, so nothing was built.")
    out.append("")
    out += field_lines("tree", ctx.tree)
    out += field_lines("base", f"{ctx.base_sha} ({ctx.base_note})")
    out += field_lines("patch subject", failed_subject)
    out += field_lines("error", error or "git am failed")
    if ctx.series_id is not None:
        out += field_lines("series", f"{policy.dashboard_url}/series/{ctx.series_id}")
    out.append("")
    out += para("If the series is meant for another tree or base, `git format-patch --base=<commit>` records "
                "its base (base-commit:) and sizewatch uses it when its tree has that commit. This is the only "
                "mail about this version of the series.")
    out.append("")
    out.append("To reproduce:")
    out.append("")
    out += reproduce_block(ctx, original, None, [name for name, _ in ctx.toolchains])
    out.append("")
    out += signature(policy)
    return "\n".join(fit(out)) + "\n"


def positions(nums: list[int], total: int) -> str:
    """``2/3, 3/3``; a long list (a cover letter claiming hundreds of patches) as runs: ``2/900-900/900``."""
    if len(nums) <= 8:
        return ", ".join(f"{n}/{total}" for n in nums)
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    text = [f"{a}/{total}" if a == b else f"{a}/{total}-{b}/{total}" for a, b in runs]
    return ", ".join(text[:8]) + (f" and {len(text) - 8} more runs" if len(text) > 8 else "")


def incomplete_body(original: BotMessage, version: int, total: int, have: list[int], missing: list[int],
                    waited: str, policy: Policy) -> str:
    out = [greeting(original), ""]
    out += para(f"sizewatch received {len(have)} of the {total} patches of this series (v{version}) but not "
                f"{positions(missing, total)} within {waited} of the first, so it did not "
                f"test the series.")
    out.append("")
    out += field_lines("received", positions(have, total) or "no patches (cover letter only)")
    out += field_lines("missing", positions(missing, total))
    out.append("")
    out += para("If the missing patches were posted, they did not reach the list archive sizewatch reads. A "
                "complete new version of the series is tested as usual. This is the only mail about this "
                "version of the series.")
    out.append("")
    out += signature(policy)
    return "\n".join(fit(out)) + "\n"


# --- the message ----------------------------------------------------------------------------

def _addr(entry: str) -> str:
    got = getaddresses([entry])
    return got[0][1].lower() if got and got[0][1] else entry.strip().lower()


def _clean(text: str) -> str:
    from ci.bot.mailbox import clean_text
    return clean_text(text)


def _address(name: str, addr: str) -> Address | None:
    """A structured address (its display name quoted as needed); None when the address is unusable."""
    name = _clean(name).strip('"')
    addr = _clean(addr)
    if not addr or "@" not in addr or " " in addr or len(addr) > 254:
        return None
    try:
        return Address(display_name=name, addr_spec=addr)
    except (ValueError, TypeError, IndexError):
        try:
            return Address(addr_spec=addr)
        except (ValueError, TypeError, IndexError):
            return None


def _parsed(entry: str) -> Address | None:
    got = getaddresses([entry])
    if len(got) != 1 or not got[0][1]:
        return None
    return _address(*got[0])


def recipients(original: BotMessage, own: str, lists: tuple[str, ...] = (),
               max_cc: int = 20) -> tuple[list[Address], list[Address]]:
    """Reply-all: (To = the original's From, Cc = its To + Cc), without the bot and without repeats;
    the Cc holds every watched list it was sent to and at most ``max_cc`` other addresses."""
    seen = {own.lower()}
    to: list[Address] = []
    author = _address(original.from_name, original.from_addr) if original.from_addr else None
    if author is not None and author.addr_spec.lower() not in seen:
        to.append(author)
        seen.add(author.addr_spec.lower())
    watched = {x.lower() for x in lists}
    cc: list[Address] = []
    others = 0
    for entry in original.to + original.cc:
        quick = entry.rpartition("<")[2].rstrip(">").strip().lower()     # as ci.bot.mailbox wrote it
        if quick in seen or (others >= max_cc and quick not in watched):
            continue                           # past the cap: not even parsed
        a = _parsed(entry)
        if a is None or a.addr_spec.lower() in seen:
            continue
        if a.addr_spec.lower() not in watched:
            if others >= max_cc:
                continue
            others += 1
        cc.append(a)
        seen.add(a.addr_spec.lower())
    return to, cc


def stable_message_id(series_key: str, finding_set: str, original_id: str, address: str) -> str:
    h = hashlib.sha256(f"{series_key}\0{finding_set}\0{original_id}".encode()).hexdigest()[:24]
    domain = address.rsplit("@", 1)[-1] or "localhost"
    return f"<sizewatch-{h}@{domain}>"


def compose(original: BotMessage, body: str, policy: Policy, message_id: str, when: datetime,
            series_key: str, position: int | None = None) -> Outgoing:
    """The reply as bytes (LF line ends; the SMTP transport converts to CRLF)."""
    to, cc = recipients(original, policy.address, policy.watch.lists, policy.max_cc)
    msg = EmailMessage(policy=POLICY)
    msg["From"] = f"{policy.name} <{policy.address}>"
    if to:
        msg["To"] = to
    if cc:
        msg["Cc"] = cc
    clean = _clean(original.subject)
    subject = clean if re.match(r"(?i)^re:", clean) else f"Re: {clean}"
    msg["Subject"] = subject
    msg["Date"] = format_datetime(when)
    msg["Message-ID"] = message_id
    msg["In-Reply-To"] = _clean(original.message_id)
    refs = list(original.references) or ([original.in_reply_to] if original.in_reply_to else [])
    msg["References"] = " ".join(dict.fromkeys(_clean(r) for r in [*refs[-20:], original.message_id]))
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Mailer"] = "sizewatch bot"
    msg["X-Sizewatch-Series"] = _clean(series_key)
    body = re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "", body)     # no NUL, CR, ESC from a subject or a log
    msg.set_content(body, charset="utf-8", cte="8bit" if not body.isascii() else "7bit")
    envelope = list(dict.fromkeys(a.addr_spec.lower() for a in to + cc))
    return Outgoing(message_id, original.message_id, subject, envelope, msg.as_bytes(), position)

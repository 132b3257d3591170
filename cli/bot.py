"""``sizewatch bot``: a thin click layer over ci.bot.service.

Transport: ``--outbox FILE`` or ``--smtp HOST[:PORT]`` on the command line, else the
config's [outbox] path or [smtp] section; with ``--dry-run`` the composed mails are
printed (as an mbox) and nothing is recorded or sent. The SMTP password is read from
the config or ``$SIZEWATCH_SMTP_PASSWORD`` only, never from the command line (where
``ps`` would show it).
"""
from __future__ import annotations

import re
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import click

from cli.common import db_option, one_line_errors, open_store, wait_option, when_up


def _transport(policy, outbox: Path | None, smtp: str | None, user: str | None, starttls: bool | None):
    from analyzer.errors import InputError
    from ci.bot.outgoing import OutboxTransport, SendError, SmtpTransport
    from ci.bot.policy import SmtpSettings
    if outbox and smtp:
        raise InputError("give either --outbox FILE or --smtp HOST[:PORT], not both")
    try:
        if outbox:
            return OutboxTransport(outbox)
        if smtp or user or starttls is not None:
            base = policy.smtp or SmtpSettings()
            changes: dict = {}
            if smtp:
                host, _, port = smtp.rpartition(":") if ":" in smtp else (smtp, "", "")
                if port and not port.isdigit():
                    raise InputError(f"--smtp {smtp}: the port must be a number")
                changes["host"] = host or smtp
                if port:
                    changes["port"] = int(port)
            if user:
                changes["username"] = user
            if starttls is not None:
                changes["starttls"] = starttls
            return SmtpTransport(replace(base, **changes))
        if policy.outbox:
            return OutboxTransport(Path(policy.outbox))
        if policy.smtp is not None:
            return SmtpTransport(policy.smtp)
    except SendError as e:
        raise InputError(str(e)) from None
    return None


def _deprecated(old: str, new: str) -> None:
    """One line on stderr for an old spelling that still works (scripts may use it): kept one release."""
    click.echo(f"sizewatch: bot {old} is deprecated and goes in the next release: use {new}", err=True)


def _policy_file(policy_file: Path | None, config_file: Path | None) -> Path | None:
    """--policy, or its old name --config (which on ``run`` names a kernel config)."""
    from analyzer.errors import InputError
    if config_file is not None:
        _deprecated("--config", "--policy")
        if policy_file is not None:
            raise InputError("give --policy only (--config is its old name)")
        return config_file
    return policy_file


def _print_status(policy_file: Path | None, as_json: bool, db: str | None) -> None:
    import json
    from ci.bot.policy import load_policy
    from ci.bot.status import bot_status, text
    policy = load_policy(policy_file)
    with open_store(db, read_only=True) as store:
        st = bot_status(store, policy)
    click.echo(json.dumps(st.to_dict(), indent=2) if as_json else text(st), nl=as_json)


_POLICY_HELP = "the bot's policy TOML (what to watch, what to report, how to mail)"


@click.group("bot", invoke_without_command=True)
@click.option("--maildir", type=click.Path(path_type=Path), help="a maildir mirror of the list")
@click.option("--mbox", type=click.Path(path_type=Path), help="an mbox mirror of the list")
@click.option("--inbox", type=click.Path(path_type=Path),
              help="a public-inbox v2 inbox or mirror of the list (git/N.git epochs), read commit by commit")
@click.option("--series", "series_file", type=click.Path(path_type=Path),
              help="one series (an mbox file) to test now; implies --once, no waiting for missing patches")
@click.option("--once", is_flag=True, help="poll once and exit (default: poll every --interval)")
@click.option("--dry-run", is_flag=True, help="print the mails instead of sending; record nothing")
@click.option("--outbox", type=click.Path(path_type=Path), help="append the mails to this mbox file")
@click.option("--smtp", "smtp_host", metavar="HOST[:PORT]", help="send through this SMTP relay")
@click.option("--smtp-user", default=None, help="SMTP login (password: config or $SIZEWATCH_SMTP_PASSWORD)")
@click.option("--smtp-starttls/--smtp-no-starttls", default=None, help="STARTTLS before login (default: on)")
@click.option("--policy", "policy_file", type=click.Path(path_type=Path), help=_POLICY_HELP)
@click.option("--config", "config_file", type=click.Path(path_type=Path), hidden=True,
              help="old name of --policy (deprecated)")
@click.option("--checks", type=click.Path(path_type=Path), help="write patchwork-style check JSON here")
@click.option("--interval", default=None, help="poll interval without --once (e.g. 60s, 5m)")
@click.option("--status", is_flag=True, hidden=True, help="old spelling of `sizewatch bot status` (deprecated)")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="with --status (deprecated)")
@click.option("--queue", "queue_url", default=None, envvar="SIZEWATCH_QUEUE", metavar="REDIS_URL",
              help="hand the builds to workers on this Redis (sizewatch worker; default $SIZEWATCH_QUEUE)")
@click.option("--attempts", default=3, show_default=True, metavar="N",
              help="with --queue: a build job failing N times is parked (the series is an infrastructure failure)")
@db_option
@wait_option
@click.pass_context
def bot_cmd(ctx: click.Context, maildir: Path | None, mbox: Path | None, inbox: Path | None, series_file: Path | None,
            once: bool, dry_run: bool, outbox: Path | None, smtp_host: str | None, smtp_user: str | None,
            smtp_starttls: bool | None, policy_file: Path | None, config_file: Path | None, checks: Path | None,
            interval: str | None, status: bool, as_json: bool, queue_url: str | None, attempts: int, db: str | None,
            wait_s: int) -> None:
    """Test each series posted to a mailing list and reply in its thread when something needs a look.

    `sizewatch bot status` prints what the bot is doing, from the store."""
    from analyzer.errors import InputError
    from ci.bot.policy import duration, load_policy
    from ci.bot.service import Bot, Source, instance_lock
    from db.pg import StoreUnavailable
    with one_line_errors():
        policy_file = _policy_file(policy_file, config_file)
        if status and ctx.invoked_subcommand is None:
            _deprecated("--status", "sizewatch bot status")
        if (status or ctx.invoked_subcommand is not None) and (maildir or mbox or inbox or series_file):
            raise InputError("bot status reads the store only: give no --maildir, --mbox, --inbox or --series")
        if ctx.invoked_subcommand is not None:           # `bot [--db D] [--policy F] status ...`: handed on
            ctx.obj = {"db": db, "policy": policy_file}
            return
        if status:
            _print_status(policy_file, as_json, db)
            return
        if as_json:
            raise InputError("--json goes with sizewatch bot status")
        given = [x for x in (maildir, mbox, inbox, series_file) if x is not None]
        if len(given) != 1:
            raise InputError("give exactly one of --maildir DIR, --mbox FILE, --inbox DIR or --series FILE")
        if maildir is not None:
            source = Source("maildir", maildir)
        elif inbox is not None:
            source = Source("inbox", inbox)
        elif mbox is not None:
            source = Source("mbox", mbox)
        else:
            source = Source("mbox", series_file, immediate=True)
            once = True
        policy = load_policy(policy_file)
        if dry_run:
            policy = replace(policy, dry_run=True)
        every = duration(interval, "--interval") if interval else policy.poll_interval
        transport = None if policy.dry_run else _transport(policy, outbox, smtp_host, smtp_user, smtp_starttls)
        source.check()                                       # a missing maildir / mbox fails before any work
        if queue_url:
            from ci.queue.names import QueueUnavailable, connect
            when_up("the queue", lambda: connect(queue_url).close(), wait_s, (QueueUnavailable,))
        with when_up("the store", lambda: open_store(db), wait_s, (StoreUnavailable,)) as store, \
                instance_lock(store):
            builds = None
            if queue_url:
                from ci.queue.coordinator import QueuedBuilds
                builds = QueuedBuilds(queue_url, attempts=max(attempts, 1))
            bot = Bot(store, policy, transport, checks_dir=checks, builds=builds)
            stop = {"now": False}

            def _stop(signum, frame):                        # finish the current step, then leave
                stop["now"] = True
            signal.signal(signal.SIGTERM, _stop)
            failed = False
            while True:
                try:
                    res = bot.poll(source)
                except StoreUnavailable as e:                # PostgreSQL restarting, a connection cut:
                    if once:                                 # nothing decided; tested at the next poll
                        raise
                    click.echo(f"sizewatch: {e}; polling again", err=True)
                    failed = True
                    time.sleep(min(every.total_seconds(), 5.0) or 1.0)
                    if stop["now"]:
                        break
                    continue
                for m in res.dry_run:                        # an mbox on stdout (mboxo: body "From " quoted)
                    click.echo(f"From {policy.address} Thu Jan  1 00:00:00 1970")
                    click.echo(re.sub(r"(?m)^From ", ">From ", m.raw.decode("utf-8", "replace")))
                click.echo(f"sizewatch: {res.summary()}", err=True)
                for e in res.errors:
                    click.echo(f"sizewatch: {e}", err=True)
                failed = bool(res.errors)
                if once or stop["now"]:
                    break
                deadline = time.monotonic() + every.total_seconds()
                while time.monotonic() < deadline and not stop["now"]:
                    time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
                if stop["now"]:
                    break
            if failed:
                sys.exit(1)


@bot_cmd.command("status")
@click.option("--policy", "policy_file", type=click.Path(path_type=Path),
              help=_POLICY_HELP + ": shown as the policy in force")
@click.option("--json", "as_json", is_flag=True, help="print it as JSON")
@db_option
@click.pass_context
def status_cmd(ctx: click.Context, policy_file: Path | None, as_json: bool, db: str | None) -> None:
    """What the bot has read, the series and their states, the mails with their text, and the policy
    in force; reads the store only."""
    given = ctx.obj or {}
    with one_line_errors():
        _print_status(policy_file or given.get("policy"), as_json, db or given.get("db"))

"""``sizewatch worker`` and ``sizewatch queue``: thin click layers over ci.queue."""
from __future__ import annotations

import click

from cli.common import one_line_errors, split, wait_option, when_up

redis_option = click.option("--redis", "redis_url", envvar="SIZEWATCH_REDIS", required=True, metavar="URL",
                            help="the queue's Redis (redis://HOST:PORT/DB; default $SIZEWATCH_REDIS)")


def _no_password_in_argv(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A Redis URL with a password is taken from $SIZEWATCH_REDIS, never from the command line (ps shows it)."""
    from click.core import ParameterSource
    from db.dialect import has_password, redact
    if value and ctx.get_parameter_source(param.name) == ParameterSource.COMMANDLINE and has_password(value):
        raise click.BadParameter(f"{redact(value)}: a password on the command line shows in ps; "
                                 "give the URL in $SIZEWATCH_REDIS")
    return value


worker_redis_option = click.option("--redis", "redis_url", envvar="SIZEWATCH_REDIS", required=True, metavar="URL",
                                   callback=_no_password_in_argv,
                                   help="the queue's Redis (redis://HOST:PORT/DB; default $SIZEWATCH_REDIS, "
                                        "which is where a URL with a password goes)")


@click.command("worker")
@click.option("--toolchains", required=True, help="the toolchains this worker holds (comma-separated)")
@click.option("--arch", "arches", default="x86_64", show_default=True, metavar="ARCHES",
              help="the kernel arches it builds them for (comma-separated: x86_64, arm64; arm64 needs each "
                   "toolchain's cross compiler): one queue per toolchain and arch")
@worker_redis_option
@click.option("--db", default=None, metavar="STORE",
              help="the store results are written to, the coordinator's: a file path or a URL without a password "
                   "(default $SIZEWATCH_DB, which is where a URL with a password goes)")
@click.option("--db-file", default=None, metavar="PATH",
              help="read the store's URL from the first line of PATH, a file only its owner may read (mode 0600)")
@click.option("--heartbeat", default=30, show_default=True, metavar="S",
              help="heartbeat interval: a worker silent for 2*S+5 s is taken as dead and its job run elsewhere")
@click.option("--burst", is_flag=True, help="stop when the queues are empty")
@click.option("--name", default=None, help="worker name (default HOST.PID)")
@click.option("--store-retries", default=8, show_default=True, metavar="N",
              help="an unavailable store is tried again N times (1, 2, 4 ... 30 s apart) before the job fails")
@wait_option
def worker_cmd(toolchains: str, arches: str, redis_url: str, db: str | None, db_file: str | None, heartbeat: int, burst: bool,
               name: str | None, store_retries: int, wait_s: int) -> None:
    """Build jobs from the queues of TOOLCHAINS for ARCHES and write the results into the store.

    Each job (a commit under one toolchain) runs in its own process; SIGTERM lets the job under way
    finish, a second SIGTERM stops at once (the job is then run again by another worker)."""
    from ci.queue.worker import run_worker, store_from
    with one_line_errors():
        from ci.queue.jobs import open_existing
        from ci.queue.names import QueueUnavailable, connect
        from db.pg import StoreUnavailable
        store = store_from(db, db_file)

        def store_up() -> None:
            with open_existing(store):
                pass
        when_up("the store", store_up, wait_s, (StoreUnavailable,))
        when_up("the queue", lambda: connect(redis_url).close(), wait_s, (QueueUnavailable,))
        run_worker(split(toolchains), redis_url, store, heartbeat=heartbeat, burst=burst, name=name,
                   store_retries=store_retries, arches=split(arches))


@click.group("queue")
def queue_cmd() -> None:
    """The build queue of the deployment mode (RQ on Redis)."""


@queue_cmd.command("status")
@redis_option
@click.option("--json", "as_json", is_flag=True)
def status_cmd(redis_url: str, as_json: bool) -> None:
    """Queues, workers with their toolchains and arches, running and parked jobs."""
    import json
    from ci.queue.status import queue_status, render
    with one_line_errors():
        st = queue_status(redis_url)
        click.echo(json.dumps(st.to_dict(), indent=2) if as_json else render(st), nl=as_json)


@queue_cmd.command("unpark")
@redis_option
@click.argument("ids", nargs=-1)
@click.option("--all", "every", is_flag=True, help="every parked job")
def unpark_cmd(redis_url: str, ids: tuple[str, ...], every: bool) -> None:
    """Release parked jobs (by id, or --all) so that the next run enqueues them afresh."""
    from analyzer.errors import InputError
    from ci.queue.status import unpark
    with one_line_errors():
        if not ids and not every:
            raise InputError("give parked job ids or --all")
        done = unpark(redis_url, list(ids), every)
        click.echo(f"unparked {len(done)} job(s)")

"""What a worker runs for one job: ``execute``, called by RQ in the worker's forked work horse.

The steps are the pipeline's own (``ci.pipeline.run``: ``missing_targets``, ``build_job``,
``store_job``), so a queued build stores exactly what ``build_all`` stores in-process. Around them,
the faults a worker meets:

- the job was delivered twice, or another worker stored the key meanwhile: the store is read
  before building and again before each write; a key already stored is left alone (one result);
- the store is briefly unavailable (PostgreSQL restarting, sqlite locked past its timeout): the
  finished build stays in memory and its objects in the cache, and the write is retried with a
  bounded back-off before the job fails (and is retried by RQ, then parked);
- the worker shares no disk with the coordinator: the job's commit is built in this machine's own
  tree, fetched from the store's git bundle when that tree lacks it (``ci.queue.trees``);
- the job was made by a coordinator reading another store than the one this worker writes: it
  fails with that said, instead of the coordinator waiting for a result that never comes. Stores are
  told apart by their identity (``Store.identity``), never by a URL: a job carries no store URL.

What RQ hands ``execute`` was checked by ``ci.queue.wire.SafeJob`` before the call and is read again
here (``job_from_dict``): plain JSON, never a pickle.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, TypeVar

from ci.pipeline.run import BuildJob, build_job, missing_targets, store_job
from ci.queue.names import QueueError
from ci.queue.trees import local_tree
from ci.queue.wire import BadPayload, job_from_dict
from db.dialect import redact
from db.errors import StoreError
from db.store import Store, open_store
from toolchains.build import toolchain_info

T = TypeVar("T")
KILL_ENV = "SIZEWATCH_QUEUE_KILL_AT"   # test hook: a commit prefix whose jobs SIGKILL their work horse


class WorkerSettings:
    """Set by ``ci.queue.worker`` before the worker forks its horses (inherited by them)."""
    store: str | None = None               # the store URL or path, from the worker's env or file, never argv
    arches: tuple[str, ...] = ("x86_64",)  # the arches the worker was started for (--arch)
    store_retries: int = 8                 # writes tried again this many times...
    store_retry_delay: float = 1.0         # ... after 1, 2, 4 ... s (at most 30 s apart)


def open_existing(url_or_path: str) -> Store:
    """The store a worker writes to; a worker never creates one (a typo would hide its results)."""
    if "://" not in url_or_path and not Path(url_or_path).expanduser().exists():
        raise StoreError(f"{url_or_path}: no such store (workers write into the store the coordinator made)")
    return open_store(url_or_path)


def with_store(url_or_path: str, work: Callable[[Store], T], what: str,
               log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> T:
    """``work(store)`` on a fresh connection, tried again while the store is unavailable (bounded)."""
    delay = WorkerSettings.store_retry_delay
    for attempt in range(WorkerSettings.store_retries + 1):
        try:
            with open_existing(url_or_path) as store:
                return work(store)
        except StoreError as e:
            if attempt == WorkerSettings.store_retries:
                raise StoreError(f"{what}: store unavailable after {attempt + 1} attempts: {e}") from None
            log(f"worker: {what}: store unavailable ({e}); trying again in {delay:.0f} s")
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
    raise AssertionError("unreachable")


def _crash_point(job: BuildJob) -> None:
    """SIZEWATCH_QUEUE_KILL_AT=<commit prefix>: the horse SIGKILLs itself on that commit's jobs, as a
    job that crashes every worker does (the tests' poisoned job)."""
    prefix = os.environ.get(KILL_ENV)
    if prefix and job.commit.sha.startswith(prefix):
        os.kill(os.getpid(), signal.SIGKILL)


def execute(job: dict, store: str, version: str) -> str:
    """Build, analyze and store ``job`` (``wire.job_to_dict``'s data) unless the store holds it already;
    returns its progress line.

    ``store`` (the coordinator's store identity) and ``version`` are what the coordinator waits on: a
    worker writing elsewhere, or holding another version of the compiler, would store a result it never
    sees, so it refuses; so does a worker not started for the job's arch."""
    def resolve_here(name: str, arch: str):
        """The job's toolchain looked up here, once, for the job's arch: an arch this worker was not
        started for is refused before its (cross) compiler is looked for."""
        if arch not in WorkerSettings.arches:
            raise QueueError(f"this worker builds {', '.join(WorkerSettings.arches)}, the job is for {arch} "
                             f"(start one with --arch {arch})")
        return toolchain_info(name, arch)

    try:
        build = job_from_dict(job, resolve_here)
    except BadPayload as e:
        raise QueueError(f"refused: {e}") from None
    mine = WorkerSettings.store
    if mine is None:
        raise QueueError("this process is no sizewatch worker (no store configured)")
    what = f"{build.commit.sha[:12]} {build.toolchain}"

    def todo_in(st: Store) -> list[str]:
        here = st.identity()
        if here != store:
            raise QueueError(f"this worker writes to {redact(mine)} ({here}), the job's coordinator reads {store}")
        return missing_targets(st, build)

    here = build.compiler.version
    if here != version:
        raise QueueError(f"{build.toolchain} here is {here}, the coordinator wants {version}")
    _crash_point(build)
    todo = with_store(mine, todo_in, what)
    if not todo:
        return f"{build.toolchain:9} {build.commit.sha[:12]} {' '.join(build.targets)}: already stored"
    build = replace(build, targets=tuple(todo))
    local = with_store(mine, lambda st: local_tree(build, lambda: st.bundle_for(build.tree, build.commit.sha)), what)
    done = build_job(build, local)
    if done.sha != build.commit.sha:
        raise QueueError(f"built {done.sha[:12]} in {local}, the job asks for {build.commit.sha[:12]}")
    return with_store(mine, lambda st: store_job(st, build, done, local=local), what)

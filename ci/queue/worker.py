"""``sizewatch worker``: an RQ worker listening on the queues of the toolchains and arches it holds.

It serves each toolchain for each arch it is started for (``--arch x86_64,arm64``; x86_64 by default):
one queue per pair (``ci.queue.names.queue_name``), every pair's compiler checked installed before it
listens (arm64's is Debian's cross compiler). A job for an arch it was not started for (a job put on the
wrong queue) is refused in one line (``ci.queue.jobs.execute``).

RQ's forking ``Worker`` runs each job in a work horse, so a job that crashes (a compiler taking the
process down, the kernel's OOM killer) costs that job, not the worker: RQ records the failure and the
job's ``Retry`` puts it back until its attempts are spent, then it stays in the failed registry
(parked: ``sizewatch queue status``). A worker killed outright (SIGKILL, a lost machine) stops
heartbeating; its job's entry in the started registry expires after ``2 × heartbeat + 5`` s and the
coordinator's clean-up (RQ's abandoned-job handling) retries it elsewhere.

The worker reads jobs as JSON with ``ci.queue.wire.SafeJob`` (it runs ``ci.queue.jobs.execute`` and
nothing else) and takes its store from where no other user can read it: ``$SIZEWATCH_DB`` or a file only
its owner may read (``--db-file``), never from a command line that ``ps`` shows (``store_from``).
"""
from __future__ import annotations

import os
import socket
import stat
import sys
from pathlib import Path
from typing import Mapping

from ci.queue.jobs import WorkerSettings, open_existing
from ci.queue.names import PREFIX, QueueError, connect, queue_name, shown
from ci.queue.wire import SERIALIZER, SafeJob
from db.dialect import has_password, redact

DB_ENV = "SIZEWATCH_DB"


def store_from(db: str | None, db_file: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """The store this worker writes to: ``--db`` (a file path, or a URL without a password),
    ``--db-file`` (the first line of a file no one but its owner may read), else ``$SIZEWATCH_DB``.
    A password on the command line is refused: every user of the machine sees it in ``ps``."""
    if db and db_file:
        raise QueueError("give the store once: --db or --db-file")
    if db:
        if "://" in db and has_password(db):
            raise QueueError(f"{redact(db)}: a password on the command line shows in ps; give the store URL "
                             f"in ${DB_ENV} or in a file only you can read (--db-file PATH, mode 0600)")
        return db
    if db_file:
        return _read_db_file(Path(db_file))
    env = environ.get(DB_ENV, "").strip()
    if not env:
        raise QueueError(f"give the store: ${DB_ENV}, --db-file PATH (a file of mode 0600 holding the URL) "
                         "or --db PATH")
    return env


def _read_db_file(path: Path) -> str:
    """The store URL in ``path``'s first line; refused when group or others may read or write the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise QueueError(f"{path}: cannot read the store file: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise QueueError(f"{path}: the store file is not a regular file")
        if st.st_mode & 0o077:
            raise QueueError(f"{path}: the store file is mode {stat.S_IMODE(st.st_mode):04o}, readable by others; "
                             f"chmod 600 {path}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(64 * 1024)
    finally:
        os.close(fd)
    lines = raw.decode("utf-8", "replace").splitlines()
    url = lines[0].strip() if lines else ""
    if not url:
        raise QueueError(f"{path}: the store file is empty (its first line is the store's URL or path)")
    return url


def heartbeat_ttl(interval: int) -> int:
    """How long a running job's entry lives without a heartbeat (RQ's own is interval + 60 s)."""
    return 2 * interval + 5


def _worker_class():
    from rq import Worker

    class BuildWorker(Worker):
        """RQ's Worker with a shorter abandoned-job delay: a job's started-registry entry lives
        ``heartbeat_ttl(job_monitoring_interval)``, so a killed worker's job is retried within it."""

        def get_heartbeat_ttl(self, job, working_time: float = 0.0) -> int:
            ttl = heartbeat_ttl(self.job_monitoring_interval)
            if job.timeout and job.timeout != -1:
                ttl = min(ttl, int(max(job.timeout - working_time, 0)) + heartbeat_ttl(self.job_monitoring_interval))
            return ttl

    return BuildWorker


def run_worker(toolchains: list[str], redis_url: str, store: str, heartbeat: int = 30, burst: bool = False,
               name: str | None = None, store_retries: int = 8, store_retry_delay: float = 1.0,
               arches: list[str] | None = None) -> bool:
    """Work the queues of ``toolchains`` for ``arches`` (x86_64 when not given) until stopped
    (SIGTERM/SIGINT: the job under way finishes first; twice: at once), or until they are empty with
    ``burst``."""
    from toolchains.build import toolchain_info
    from toolchains.registry import ARCHES
    if not toolchains:
        raise QueueError("give the toolchains this worker holds (--toolchains gcc-12,clang-19)")
    arches = list(dict.fromkeys(arches or ["x86_64"]))
    for arch in arches:
        if arch not in ARCHES:
            raise QueueError(f"--arch: unknown arch {arch!r} (known: {', '.join(ARCHES)})")
    pairs = [(tc, arch) for tc in toolchains for arch in arches]
    for tc, arch in pairs:
        toolchain_info(tc, arch)           # unknown or not installed here: refused before listening
    with open_existing(store) as st:       # the store must be there and usable now
        identity = st.identity()
    WorkerSettings.store = store           # as given: opened by that name for each job
    WorkerSettings.arches = tuple(arches)
    WorkerSettings.store_retries, WorkerSettings.store_retry_delay = store_retries, store_retry_delay
    conn = connect(redis_url)
    from rq import Queue
    # workers take jobs from their queues in order: each starts at another toolchain (a counter in
    # Redis), so workers sharing one host's build dirs do not queue up behind one toolchain's lock
    k = int(conn.incr(PREFIX + "workers-started")) % len(pairs)
    queues = [Queue(queue_name(tc, arch), connection=conn, job_class=SafeJob, serializer=SERIALIZER)
              for tc, arch in pairs[k:] + pairs[:k]]
    worker = _worker_class()(queues, connection=conn, job_monitoring_interval=heartbeat,
                             maintenance_interval=max(heartbeat * 2, 10), job_class=SafeJob, serializer=SERIALIZER,
                             name=name or f"{socket.gethostname()}.{os.getpid()}")
    print(f"worker {worker.name}: listening on {', '.join(q.name for q in queues)} at {shown(redis_url)}, "
          f"writing to {redact(store)} ({identity})", file=sys.stderr, flush=True)
    return worker.work(burst=burst, with_scheduler=False, logging_level="WARNING")


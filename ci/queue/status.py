"""``sizewatch queue status``: what the queue holds, read from Redis alone.

Per queue (one per toolchain and arch): jobs waiting, running and parked; the workers with the
toolchains and arches they listen for, their state and current job; the running jobs with their worker
and start; the parked jobs (failed on every attempt, see ``ci.queue.coordinator``) with their attempts
and last error.

Everything shown comes from Redis, which anyone able to write to it may have forged (a description
carrying newlines and terminal escapes would print status lines of its own): every string is cleaned
of control characters (``ci.bot.mailbox.clean_text``) and bounded, in the text and in the JSON.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ci.bot.mailbox import clean_text
from ci.queue.coordinator import last_error
from ci.queue.names import PREFIX, QueueError, connect, parse_queue, shown
from ci.queue.wire import SERIALIZER, SafeJob, workers

MAX_SHOWN = 300                      # characters of one field from Redis


def _clean(v: object) -> str | None:
    """A value read from Redis, fit for one line of a terminal (None stays None)."""
    return None if v is None else clean_text(str(v))[:MAX_SHOWN]


@dataclass
class QueueRow:
    name: str
    toolchain: str
    arch: str
    queued: int
    running: int
    parked: int


@dataclass
class WorkerRow:
    name: str
    toolchains: list[str]
    arches: list[str]
    state: str
    job: str | None
    last_heartbeat: str | None
    done: int
    failed: int


@dataclass
class JobRow:
    id: str
    description: str
    queue: str
    worker: str | None = None
    since: str | None = None
    error: str | None = None


@dataclass
class QueueStatus:
    redis: str
    queues: list[QueueRow] = field(default_factory=list)
    workers: list[WorkerRow] = field(default_factory=list)
    running: list[JobRow] = field(default_factory=list)
    parked: list[JobRow] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _iso(d) -> str | None:
    return d.isoformat(timespec="seconds") if d is not None else None


def queue_status(redis_url: str) -> QueueStatus:
    from redis.exceptions import RedisError
    from rq import Queue
    from rq.registry import FailedJobRegistry, StartedJobRegistry
    conn = connect(redis_url)
    out = QueueStatus(shown(redis_url))

    def fetch(jid: str):
        """The job, or None when it is gone or its entry cannot be read (a forged date, no data)."""
        if not SafeJob.exists(jid, connection=conn):
            return None
        try:
            return SafeJob.fetch(jid, connection=conn, serializer=SERIALIZER)
        except RedisError:
            raise
        except Exception:              # noqa: BLE001 - whatever RQ makes of a damaged entry: not shown
            return None

    try:
        queues = sorted((q for q in Queue.all(connection=conn, job_class=SafeJob, serializer=SERIALIZER)
                         if q.name.startswith(PREFIX)), key=lambda q: q.name)
        for q in queues:
            started, failed = StartedJobRegistry(queue=q), FailedJobRegistry(queue=q)
            tc, arch = parse_queue(q.name) or ("", "")
            out.queues.append(QueueRow(_clean(q.name), _clean(tc), _clean(arch), q.count, started.count, failed.count))
            for jid in started.get_job_ids():
                job = fetch(jid)
                if job is not None:
                    out.running.append(JobRow(_clean(jid), _clean(job.description or ""), _clean(q.name),
                                              _clean(job.worker_name), _iso(job.started_at)))
            for jid in failed.get_job_ids():
                job = fetch(jid)
                if job is not None:
                    out.parked.append(JobRow(_clean(jid), _clean(job.description or ""), _clean(q.name),
                                             _clean(job.worker_name), _iso(job.ended_at), _clean(last_error(job))))
        for w in sorted(workers(conn), key=lambda w: w.name):
            names = [n for n in w.queue_names() if n.startswith(PREFIX)]
            if not names:
                continue
            pairs = [parse_queue(n) or (n, "") for n in names]
            out.workers.append(WorkerRow(_clean(w.name), sorted({_clean(tc) for tc, _ in pairs}),
                                         sorted({_clean(arch) for _, arch in pairs}), _clean(w.get_state()), _clean(w.get_current_job_id()),
                                         _iso(w.last_heartbeat), w.successful_job_count, w.failed_job_count))
    except RedisError as e:
        raise QueueError(f"{shown(redis_url)}: {e}") from None
    return out


def render(st: QueueStatus) -> str:
    """The status as text: one table per part, nothing hidden when empty (says 'none')."""
    lines = [f"queue {st.redis}", "", "queues:"]
    if st.queues:
        lines.append(f"  {'queue':28} {'queued':>7} {'running':>8} {'parked':>7}")
        lines += [f"  {q.name:28} {q.queued:7d} {q.running:8d} {q.parked:7d}" for q in st.queues]
    else:
        lines.append("  none")
    lines += ["", "workers:"]
    if st.workers:
        for w in st.workers:
            lines.append(f"  {w.name}  [{', '.join(w.toolchains)}] {', '.join(w.arches)}  {w.state}"
                         + (f"  job {w.job}" if w.job else "") + f"  done {w.done}, failed {w.failed}"
                         + (f"  heartbeat {w.last_heartbeat}" if w.last_heartbeat else ""))
    else:
        lines.append("  none")
    lines += ["", "running:"]
    lines += [f"  {j.description}  on {j.worker or '?'} since {j.since or '?'}  ({j.id})" for j in st.running] or ["  none"]
    lines += ["", "parked (failed on every attempt; sizewatch queue unpark ID lets a run enqueue it again):"]
    lines += [f"  {j.description}: {j.error}  ({j.id}, last worker {j.worker or '?'})" for j in st.parked] or ["  none"]
    return "\n".join(lines) + "\n"


def unpark(redis_url: str, ids: list[str], every: bool = False) -> list[str]:
    """Remove parked jobs (all with ``every``) so that the next run enqueues them afresh."""
    from rq import Queue
    from rq.registry import FailedJobRegistry
    conn = connect(redis_url)
    done = []
    for q in Queue.all(connection=conn, job_class=SafeJob, serializer=SERIALIZER):
        if not q.name.startswith(PREFIX):
            continue
        reg = FailedJobRegistry(queue=q)
        for jid in reg.get_job_ids():
            if every or jid in ids:
                reg.remove(jid, delete_job=True)
                done.append(jid)
    missing = [i for i in ids if i not in done]
    if missing:
        raise QueueError(f"not parked: {', '.join(missing)}")
    return done

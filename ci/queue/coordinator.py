"""Stage 2 of the pipeline through build workers: enqueue what the store lacks, wait on the store.

``QueuedBuilds(redis_url, store)`` has ``ci.pipeline.run.build_all``'s signature, so ``run`` and the
bot take either. The store is the source of truth and the queue only a hint:

- a job is done when the store holds its key (commit, toolchain + exact version, config, target),
  whoever wrote it; RQ's results are not read;
- a job the queue no longer knows (Redis restarted without persistence, flushed, its entry expired)
  while the store still lacks it is enqueued again;
- a worker that died mid-job (SIGKILL, a lost machine) stops heartbeating: each poll runs RQ's
  clean-up of the started registries (``StartedJobRegistry.cleanup``), which retries the job while
  it has attempts left;
- a job that failed on every attempt (a crash each time, a store it can never write) is *parked*
  in RQ's failed registry: reported here and by ``sizewatch queue status``, never enqueued again by
  a later run until it expires (``PARKED_TTL``) or ``sizewatch queue unpark`` releases it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ci.pipeline.plan import RunPlan
from ci.pipeline.run import BuildJob, RunStats, missing_targets, plan_jobs
from ci.queue.jobs import store_key
from ci.queue.names import QueueError, connect, describe, job_id, queue_name
from db.store import Store
from toolchains.kbuild import Config
from toolchains.mca import DEFAULT_MCPU

PARKED_TTL = 7 * 24 * 3600          # a parked job is kept (and not run again) for a week
RESULT_TTL = 24 * 3600
ACTIVE = ("queued", "started", "scheduled", "deferred")


def store_url(store: Store) -> str:
    """How workers name the coordinator's store: its URL, or its file's real path."""
    url = getattr(store, "url", None)
    return str(url) if url else store_key(str(store.path))


def last_error(job) -> str:
    """The last line of a failed job's error, or what RQ says about it."""
    try:
        res = job.latest_result()
        text = (res.exc_string if res is not None else "") or ""
    except Exception:                  # noqa: BLE001 - an unreadable result is no reason to stop
        text = ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "failed on every attempt"


@dataclass
class QueuedBuilds:
    """Stage 2 through RQ: ``attempts`` runs per job before it is parked, ``job_timeout`` seconds per run."""
    redis_url: str
    attempts: int = 3
    job_timeout: int = 3600
    poll: float = 0.5
    store: str | None = None          # the store workers write to (default: the coordinator's own)

    def __call__(self, store: Store, plan: RunPlan, toolchains: list[str], targets: list[str],
                 config: Config | None = None, progress: Callable[[str], None] = lambda s: None,
                 mcpu: str = DEFAULT_MCPU) -> RunStats:
        from rq import Queue, Retry
        from rq.exceptions import NoSuchJobError
        from rq.job import Job
        from rq.registry import StartedJobRegistry
        from rq.worker import Worker
        from toolchains.build import toolchain_info

        conn = connect(self.redis_url)
        target_store = self.store or store_url(store)
        stats = RunStats()
        jobs = plan_jobs(store, plan, toolchains, targets, config, mcpu, stats)
        versions = {tc: toolchain_info(tc)[1] for tc in toolchains}
        queues = {tc: Queue(queue_name(tc), connection=conn) for tc in toolchains}
        pending: dict[str, BuildJob] = {}
        had: dict[str, set[str]] = {}        # targets stored before (re-analysis) per job
        for job in jobs:
            jid = job_id(job, versions[job.toolchain])
            pending[jid] = job
            had[jid] = {t for t in job.targets if store.find_build(job.tree, job.commit.sha, job.toolchain,
                                                                   job.config_key, t, versions[job.toolchain])}

        def enqueue(jid: str, job: BuildJob) -> None:
            queues[job.toolchain].enqueue_call(
                "ci.queue.jobs.execute", args=(job, target_store, versions[job.toolchain]), job_id=jid,
                timeout=self.job_timeout, result_ttl=RESULT_TTL, failure_ttl=PARKED_TTL,
                description=describe(job), retry=Retry(max=self.attempts - 1) if self.attempts > 1 else None)

        def status(jid: str):
            try:
                return Job.fetch(jid, connection=conn).get_status(refresh=False)
            except NoSuchJobError:
                return None

        def park(jid: str, job: BuildJob, why: str) -> None:
            line = f"{describe(job)}: parked after {self.attempts} attempt(s): {why} (job {jid})"
            stats.parked.append(line)
            stats.lines.append(line)
            progress(line)
            del pending[jid]

        try:
            for jid, job in list(pending.items()):
                st = status(jid)
                if st == "failed":
                    park(jid, job, last_error(Job.fetch(jid, connection=conn)))
                elif st not in ACTIVE:
                    enqueue(jid, job)
            if pending:
                progress(f"queue: {len(pending)} job(s) on {self.redis_url} ({', '.join(sorted({queue_name(j.toolchain) for j in pending.values()}))})")
            idle_note = 0.0
            while pending:
                for q in {queues[j.toolchain].name: queues[j.toolchain] for j in pending.values()}.values():
                    StartedJobRegistry(queue=q).cleanup()      # abandoned jobs: retried or failed
                for jid, job in list(pending.items()):
                    if not missing_targets(store, job, versions[job.toolchain]):
                        del pending[jid]
                        line = self._done(store, job, versions[job.toolchain], had[jid], stats)
                        stats.lines.append(line)
                        progress(line)
                        continue
                    st = status(jid)
                    if st is None:
                        progress(f"{describe(job)}: the queue lost this job (Redis restarted or emptied): enqueued again")
                        enqueue(jid, job)
                    elif st == "failed":
                        park(jid, job, last_error(Job.fetch(jid, connection=conn)))
                    elif st in ("finished", "canceled", "stopped"):
                        # ended without the store holding it (written under another key): run again
                        if missing_targets(store, job, versions[job.toolchain]):
                            progress(f"{describe(job)}: ended ({st}) without a stored result: enqueued again")
                            enqueue(jid, job)
                now = time.monotonic()
                if pending and now - idle_note > 60:
                    idle_note = now
                    for tc in sorted({j.toolchain for j in pending.values()}):
                        if not Worker.all(queue=queues[tc]):
                            progress(f"queue: no worker listens on {queue_name(tc)} (start one: sizewatch worker "
                                     f"--toolchains {tc} --redis URL --db STORE); waiting")
                if pending:
                    time.sleep(self.poll)
        except QueueError:
            raise
        except Exception as e:
            from redis.exceptions import RedisError
            if isinstance(e, RedisError):
                raise QueueError(f"{self.redis_url}: {e}") from None
            raise
        return stats

    @staticmethod
    def _done(store: Store, job: BuildJob, version: str, had: set[str], stats: RunStats) -> str:
        """Count a job the store now holds and give its progress line (as the in-process run prints it)."""
        builds = [store.find_build(job.tree, job.commit.sha, job.toolchain, job.config_key, t, version)
                  for t in job.targets]
        for t, b in zip(job.targets, builds):
            if t in had:
                stats.reanalyzed += 1
            else:
                stats.built += 1
            if b is not None and b.status != "ok":
                stats.failed += 1
        first = builds[0]
        errors = next((b.errors for b in builds if b is not None and b.errors), [])
        return (f"{job.toolchain:9} {job.commit.sha[:12]} {' '.join(job.targets)}: {first.status} "
                f"({first.method}, {first.seconds:.1f} s)" + (f": {errors[0]}" if errors else ""))

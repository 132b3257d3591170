"""Stage 2 of the pipeline through build workers: enqueue what the store lacks, wait on the store.

``QueuedBuilds(redis_url, store)`` has ``ci.pipeline.run.build_all``'s signature, so ``run`` and the
bot take either. The store is the source of truth and the queue only a hint:

- a job is done when the store holds its key (commit, toolchain + exact version, config, target),
  whoever wrote it; RQ's results are not read;
- a commit ``git am`` made in Debian's tree is written into the store as a git bundle before its
  jobs are enqueued (``ci.queue.trees``): workers on other machines fetch it into their own tree;
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

from redis.exceptions import ConnectionError as RedisConnectionError, RedisError, TimeoutError as RedisTimeoutError

from ci.bot.mailbox import clean_text
from ci.pipeline import builder
from ci.pipeline.measure import Measure
from ci.pipeline.plan import RunPlan
from ci.pipeline.run import BuildJob, RunStats, missing_targets, plan_jobs
from ci.queue.names import QueueError, connect, describe, flavour, job_id, queue_name, shown
from ci.queue.trees import publish
from ci.queue.wire import FUNCTION, SERIALIZER, SafeJob, job_args, workers
from db.store import Store
from toolchains.build import ResolvedToolchain
from toolchains.kbuild import Config
from toolchains.mca import DEFAULT_MCPU
from toolchains.retention import DEFAULT_KEEP

PARKED_TTL = 7 * 24 * 3600          # a parked job is kept (and not run again) for a week
RESULT_TTL = 24 * 3600
ACTIVE = ("queued", "started", "scheduled", "deferred")


def last_error(job) -> str:
    """The last line of a failed job's error, or what RQ says about it."""
    try:
        res = job.latest_result()
        text = (res.exc_string if res is not None else "") or ""
    except Exception:                  # noqa: BLE001 - an unreadable result is no reason to stop
        text = ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return clean_text(lines[-1])[:300] if lines else "failed on every attempt"     # from Redis: maybe forged


JOB_MARGIN = 900              # s past the build's own limit: waiting for the build dir, analysis, store retries


def job_timeout(base: int, job: BuildJob) -> int:
    """RQ's limit for one run of ``job``: ``base``, or the build's own time-out plus a margin when that
    is longer (``builder.options_for``: 3 h for a vmlinux), so RQ never kills a build kbuild may finish."""
    own = builder.options_for(list(job.targets), job.measure).timeout
    if own and job.measure is not None:
        own += job.measure.timeout       # the vmlinux's measurement runs in the job too
    return max(base, int(own) + JOB_MARGIN) if own else base


@dataclass
class QueuedBuilds:
    """Stage 2 through RQ: ``attempts`` runs per job before it is parked, ``job_timeout`` seconds per run
    (at least the build's own limit and a margin: a vmlinux job gets a whole kernel's hours)."""
    redis_url: str
    attempts: int = 3
    job_timeout: int = 3600
    poll: float = 0.5
    redis_wait: float = 300.0         # Redis unreachable this long while waiting: give up
    function: str = FUNCTION          # what workers run (bench/queue_bench.py: a synthetic job its workers allow)

    def __post_init__(self) -> None:
        connect(self.redis_url)       # a bad URL or an unreachable Redis fails before any work

    def __call__(self, store: Store, plan: RunPlan, toolchains: list[ResolvedToolchain], targets: list[str],
                 config: Config | None = None, progress: Callable[[str], None] = lambda s: None,
                 mcpu: str = DEFAULT_MCPU, keep_vmlinux: int = DEFAULT_KEEP, measure: Measure | None = None) -> RunStats:
        stats = RunStats()
        jobs = plan_jobs(store, plan, toolchains, targets, config, mcpu, stats, keep_vmlinux, measure)
        if not jobs:
            return stats
        publish(store, jobs, progress)            # before any job: a worker without this tree reads them
        run = Run(self, store, jobs, stats, progress)
        try:
            run.wait()
        except RedisError as e:
            raise QueueError(f"{shown(self.redis_url)}: {e}") from None
        return stats


class Run:
    """One coordinator's jobs, from enqueueing to each one stored or parked."""

    def __init__(self, cfg: QueuedBuilds, store: Store, jobs: list[BuildJob], stats: RunStats,
                 progress: Callable[[str], None]):
        from rq import Queue
        self.cfg, self.store, self.stats, self.progress = cfg, store, stats, progress
        self.conn = connect(cfg.redis_url)
        self.identity = store.identity()          # what the jobs name their store by: no URL, no password
        kinds = {(j.toolchain, j.config.arch) for j in jobs}     # one queue per toolchain and arch
        self.queues = {k: Queue(queue_name(*k), connection=self.conn, job_class=SafeJob, serializer=SERIALIZER)
                       for k in kinds}
        self.pending = {job_id(j, j.compiler.version): j for j in jobs}
        self.had = {jid: {t for t in j.targets if store.has_build(j.tree, j.commit.sha, j.toolchain, j.config_key, t,
                                                                  j.compiler.version)}
                    for jid, j in self.pending.items()}          # stored before: re-analysis
        self.again = dict.fromkeys(self.pending, 0)              # times enqueued again

    def enqueue(self, jid: str, job: BuildJob) -> None:
        from rq import Retry
        self.queues[(job.toolchain, job.config.arch)].enqueue_call(
            self.cfg.function, args=job_args(job, self.identity, job.compiler.version), job_id=jid,
            timeout=job_timeout(self.cfg.job_timeout, job), result_ttl=RESULT_TTL, failure_ttl=PARKED_TTL, description=describe(job),
            retry=Retry(max=self.cfg.attempts - 1) if self.cfg.attempts > 1 else None)

    def job(self, jid: str):
        from rq.exceptions import NoSuchJobError
        try:
            return SafeJob.fetch(jid, connection=self.conn, serializer=SERIALIZER)
        except NoSuchJobError:
            return None

    def park(self, jid: str, why: str) -> None:
        job = self.pending.pop(jid)
        line = f"{job.toolchain + flavour(job):9} {job.commit.sha[:12]} {' '.join(job.targets)}: parked after {self.cfg.attempts} attempt(s): {why} (job {jid})"
        self.stats.parked.append(line)
        self.stats.lines.append(line)
        self.progress(line)

    def requeue(self, jid: str, why: str) -> None:
        """Enqueue a job again that the queue lost or that ended unstored; bounded like its attempts."""
        self.again[jid] += 1
        if self.again[jid] > 5 * self.cfg.attempts:
            self.park(jid, f"{why} {self.again[jid] - 1} times")
            return
        self.progress(f"{describe(self.pending[jid])}: {why}: enqueued again")
        self.enqueue(jid, self.pending[jid])

    def stored(self, jid: str) -> bool:
        job = self.pending[jid]
        return not missing_targets(self.store, job)

    def wait(self) -> None:
        for jid, job in list(self.pending.items()):
            rq_job = self.job(jid)
            status = rq_job.get_status(refresh=False) if rq_job is not None else None
            if status == "failed":
                self.park(jid, last_error(rq_job))
            elif status not in ACTIVE:
                self.enqueue(jid, job)
        if self.pending:
            self.progress(f"queue: {len(self.pending)} job(s) on {shown(self.cfg.redis_url)} "
                          f"({', '.join(sorted({queue_name(j.toolchain, j.config.arch) for j in self.pending.values()}))})")
        idle_note, down_since = time.monotonic(), None
        while self.pending:
            try:
                self.step()
                down_since = None
            except (RedisConnectionError, RedisTimeoutError) as e:
                if down_since is None:
                    down_since = time.monotonic()
                    self.progress(f"queue: Redis unreachable ({e}); waiting for it (the store keeps what is done)")
                elif time.monotonic() - down_since > self.cfg.redis_wait:
                    raise QueueError(f"{shown(self.cfg.redis_url)}: unreachable for {self.cfg.redis_wait:.0f} s: {e}") from None
                time.sleep(max(self.cfg.poll, 1.0))
                continue
            if self.pending and time.monotonic() - idle_note > 30:
                idle_note = time.monotonic()
                self.note_idle()
            if self.pending:
                time.sleep(self.cfg.poll)

    def step(self) -> None:
        """One poll: RQ's abandoned-job clean-up, then each pending job against the store, then the queue."""
        from rq.registry import StartedJobRegistry
        for k in {(j.toolchain, j.config.arch) for j in self.pending.values()}:
            StartedJobRegistry(queue=self.queues[k]).cleanup()     # abandoned jobs: retried or failed
        for jid in list(self.pending):
            if self.stored(jid):
                self.finish(jid)
                continue
            rq_job = self.job(jid)
            status = rq_job.get_status(refresh=False) if rq_job is not None else None
            if status is None:
                self.requeue(jid, "the queue lost this job (Redis restarted or emptied)")
            elif status == "failed":
                self.park(jid, last_error(rq_job))
            elif status not in ACTIVE and not self.stored(jid):      # stored meanwhile: done next poll
                self.requeue(jid, f"ended ({status}) without a stored result")

    def note_idle(self) -> None:
        for tc, arch in sorted({(j.toolchain, j.config.arch) for j in self.pending.values()}):
            if not workers(self.conn, self.queues[(tc, arch)]):
                self.progress(f"queue: no worker listens on {queue_name(tc, arch)} (start one: sizewatch worker "
                              f"--toolchains {tc} --arch {arch} with $SIZEWATCH_REDIS and $SIZEWATCH_DB set); waiting")

    def finish(self, jid: str) -> None:
        """Count a job the store now holds and print its line (as the in-process run prints it)."""
        job = self.pending.pop(jid)
        builds = [self.store.find_build(job.tree, job.commit.sha, job.toolchain, job.config_key, t, job.compiler.version)
                  for t in job.targets]
        for t, b in zip(job.targets, builds):
            if t in self.had[jid]:
                self.stats.reanalyzed += 1
            else:
                self.stats.built += 1
            if b is not None and b.status != "ok":
                self.stats.failed += 1
        first = next(b for b in builds if b is not None)
        errors = next((b.errors for b in builds if b is not None and b.errors), [])
        line = (f"{job.toolchain:9} {job.commit.sha[:12]} {' '.join(job.targets)}: {first.status} "
                f"({first.method}, {first.seconds:.1f} s)" + (f": {errors[0]}" if errors else ""))
        self.stats.lines.append(line)
        self.progress(line)

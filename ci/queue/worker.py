"""``sizewatch worker``: an RQ worker listening on the queues of the toolchains it holds.

RQ's forking ``Worker`` runs each job in a work horse, so a job that crashes (a compiler taking the
process down, the kernel's OOM killer) costs that job, not the worker: RQ records the failure and the
job's ``Retry`` puts it back until its attempts are spent, then it stays in the failed registry
(parked: ``sizewatch queue status``). A worker killed outright (SIGKILL, a lost machine) stops
heartbeating; its job's entry in the started registry expires after ``2 × heartbeat + 5`` s and the
coordinator's clean-up (RQ's abandoned-job handling) retries it elsewhere.
"""
from __future__ import annotations

import os
import socket
import sys

from ci.queue.jobs import WorkerSettings, open_existing
from ci.queue.names import PREFIX, QueueError, connect, queue_name, shown


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
               name: str | None = None, store_retries: int = 8, store_retry_delay: float = 1.0) -> bool:
    """Work the queues of ``toolchains`` until stopped (SIGTERM/SIGINT: the job under way finishes
    first; twice: at once), or until they are empty with ``burst``."""
    from toolchains.build import toolchain_info
    if not toolchains:
        raise QueueError("give the toolchains this worker holds (--toolchains gcc-12,clang-19)")
    for tc in toolchains:
        toolchain_info(tc)                 # unknown or not installed here: refused before listening
    with open_existing(store):             # the store must be there and usable now
        pass
    WorkerSettings.store = store           # as given: opened by that name for each job
    WorkerSettings.store_retries, WorkerSettings.store_retry_delay = store_retries, store_retry_delay
    conn = connect(redis_url)
    from rq import Queue
    # workers take jobs from their queues in order: each starts at another toolchain (a counter in
    # Redis), so workers sharing one host's build dirs do not queue up behind one toolchain's lock
    k = int(conn.incr(PREFIX + "workers-started")) % len(toolchains)
    queues = [Queue(queue_name(tc), connection=conn) for tc in toolchains[k:] + toolchains[:k]]
    worker = _worker_class()(queues, connection=conn, job_monitoring_interval=heartbeat,
                             maintenance_interval=max(heartbeat * 2, 10),
                             name=name or f"{socket.gethostname()}.{os.getpid()}")
    print(f"worker {worker.name}: listening on {', '.join(q.name for q in queues)} at {shown(redis_url)}, "
          f"writing to {shown(store)}", file=sys.stderr, flush=True)
    return worker.work(burst=burst, with_scheduler=False, logging_level="WARNING")


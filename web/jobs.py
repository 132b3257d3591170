"""Work the dashboard starts on request (re-run a commit): a real ``sizewatch run`` in the background
against the server's own store, its output kept in a log file the job page shows.

A subprocess, not a thread: the pipeline builds kernels for minutes and takes file locks; it must
not hold the server's threads, and it keeps going if the server is restarted.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Job:
    id: int
    key: str                        # what it works on (a commit sha): one running job per key
    argv: list[str]
    log: Path
    started: float = field(default_factory=time.time)
    returncode: int | None = None
    finished: float | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def state(self) -> str:
        if self.returncode is None:
            return "running"
        return "done" if self.returncode == 0 else "failed"

    def output(self, limit: int = 20_000) -> str:
        """The end of the job's log (the pipeline's progress lines and report)."""
        try:
            data = self.log.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")

    def to_dict(self) -> dict:
        return {"id": self.id, "key": self.key, "state": self.state, "returncode": self.returncode,
                "argv": self.argv, "started": self.started, "finished": self.finished}


class Jobs:
    """The server's background jobs, numbered from 1 per server process."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self._jobs: dict[int, Job] = {}
        self._lock = threading.Lock()

    def start(self, key: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[Job, bool]:
        """Start ``argv`` (with ``env`` added to the server's environment) unless a job for ``key`` is
        still running; returns (job, started)."""
        with self._lock:
            for job in self._jobs.values():
                if job.key == key and job.state == "running":
                    return job, False
            self.log_dir.mkdir(parents=True, exist_ok=True)
            jid = max(self._jobs, default=0) + 1
            log = self.log_dir / f"job-{int(time.time())}-{jid}.log"
            job = Job(jid, key, argv, log)
            with open(log, "wb") as out:
                out.write(("$ " + " ".join(argv) + "\n").encode())
                out.flush()
                job._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                             start_new_session=True, env={**os.environ, **env} if env else None)
            self._jobs[jid] = job
        threading.Thread(target=self._reap, args=(job,), daemon=True, name=f"sizewatch-job-{jid}").start()
        return job, True

    @staticmethod
    def _reap(job: Job) -> None:
        rc = job._proc.wait()
        job.finished = time.time()
        job.returncode = rc

    def get(self, jid: int) -> Job | None:
        return self._jobs.get(jid)

    def all(self) -> list[Job]:
        return sorted(self._jobs.values(), key=lambda j: -j.id)

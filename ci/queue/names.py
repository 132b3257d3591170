"""Redis connections, queue names and job ids: what the coordinator, the workers and the status
command must agree on.

One RQ queue per toolchain and arch (``sizewatch:gcc-12`` for x86_64, whose names predate arches as
its config keys do; ``sizewatch:arm64:gcc-12`` for arm64), so a job goes to a worker holding that
compiler for that arch (a cross compiler is another package) and its warm build dirs. A job's id is derived from its key (tree, commit, toolchain with its exact
version, config, targets, CPU model), so a coordinator enqueuing the same work twice, or two
coordinators, name one job, and a status line says which build it is.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from analyzer.errors import SizewatchError
from db.dialect import redact

if TYPE_CHECKING:
    from redis import Redis

    from ci.pipeline.run import BuildJob

PREFIX = "sizewatch:"


class QueueError(SizewatchError):
    """Redis cannot be reached or the queue cannot be used: one line."""


class QueueUnavailable(QueueError):
    """Redis could not be reached (down, starting, loading its data): trying again later may work."""


def connect(url: str) -> "Redis":
    """A Redis connection for ``url`` (redis://HOST:PORT/DB), checked with a PING."""
    from redis import Redis
    from redis.exceptions import RedisError
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise QueueError(f"{shown(url)}: not a Redis URL (redis://HOST:PORT/DB)")
    try:
        conn = Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)
    except ValueError as e:
        raise QueueError(f"{shown(url)}: cannot reach Redis: {e}") from None
    try:
        conn.ping()
    except (RedisError, ValueError) as e:
        raise QueueUnavailable(f"{shown(url)}: cannot reach Redis: {e}") from None
    return conn


def shown(url: str) -> str:
    """A URL fit to print: without its password in any spelling (the store's masking, ``db.dialect.redact``;
    redis-py takes ``?password=`` too)."""
    return redact(url)


def queue_name(toolchain: str, arch: str = "x86_64") -> str:
    """The queue of ``toolchain``'s jobs for ``arch`` (x86_64's name has no arch: it predates arches)."""
    return PREFIX + (toolchain if arch == "x86_64" else f"{arch}:{toolchain}")


def parse_queue(queue: str) -> tuple[str, str] | None:
    """(toolchain, arch) of a sizewatch queue's name, None for any other name."""
    if not queue.startswith(PREFIX):
        return None
    arch, _, tc = queue[len(PREFIX):].rpartition(":")
    return tc, arch or "x86_64"


def job_id(job: "BuildJob", version: str) -> str:
    """The job's stable id: the hash of its store key and the CPU its likely paths are estimated for."""
    key = "\0".join((job.tree, job.commit.sha, job.toolchain, version, job.config_key, *job.targets, job.mcpu))
    return f"sw-{job.toolchain}-{job.commit.sha[:12]}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def flavour(job: "BuildJob") -> str:
    """What sets the job apart beyond its toolchain: `` arm64``, `` thinlto``, `` arm64 thinlto`` or ``""``
    (x86_64 without LTO, as every job was before arches)."""
    from toolchains.flavour import flavour as of
    return of(job.config.arch, job.config.lto)


def describe(job: "BuildJob") -> str:
    return f"{job.toolchain}{flavour(job)} {job.commit.sha[:12]} {' '.join(job.targets)}"

"""What travels through Redis: plain JSON, read back by a job class that runs one function only.

RQ's defaults are pickles (unpickling runs whatever the bytes say) and an import of whatever dotted
name a job carries, so anyone able to write to Redis could run code on every worker and on the
coordinator reading the registries (issue 27). Here:

- every queue, worker and registry uses RQ's ``JSONSerializer`` and ``SafeJob``, which forces it:
  job data, results and meta are JSON whatever serializer a caller passes, never unpickled;
- a job's data must be exactly ``["ci.queue.jobs.execute", null, [JOB, STORE, VERSION], {}]``: JOB a
  ``BuildJob`` as the dict ``job_to_dict`` writes (every field checked by ``job_from_dict``; its config
  carries the arch, one of ``toolchains.registry.ARCHES``, and the fragment the LTO mode is read from), STORE the
  store's secret-free identity (``Store.identity``: a job carries no store URL), VERSION the compiler
  version. Anything else is refused before anything is imported or called: the job fails at once,
  without retries, with one line saying why (``JobRefused``), and stays parked;
- RQ's success/failure/stopped callbacks and webhooks (names or URLs a job may carry) are never
  imported nor sent: sizewatch sets none, a job that has any is refused.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict
from typing import Any, Callable, ClassVar

from rq.exceptions import DeserializationError
from rq.job import Job
from rq.serializers import JSONSerializer

from ci.pipeline.measure import Measure
from ci.pipeline.run import BuildJob
from db.models import Commit
from toolchains.build import ResolvedToolchain, toolchain_info
from toolchains.kbuild import Config

FUNCTION = "ci.queue.jobs.execute"
SERIALIZER = JSONSerializer

_SHA = re.compile(r"[0-9a-f]{40}")
_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,128}")                    # tree, toolchain, config base/arch/name
_TARGET = re.compile(r"[A-Za-z0-9_./+-]{1,255}")
_MCPU = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_STORE = re.compile(r"store-[0-9a-f]{1,16}")
_CONFIG_LINE = re.compile(r"CONFIG_[A-Za-z0-9_]+=[^\x00-\x1f\x7f]{0,1000}|# CONFIG_[A-Za-z0-9_]+ is not set")
_TEXT_MAX = 4096


class BadPayload(ValueError):
    """A job's data is not what sizewatch writes: the one line saying which part."""


class JobRefused(DeserializationError):
    """A job a worker will not run (RQ records it as the job's failure, its last line the reason)."""


# --- BuildJob <-> JSON ------------------------------------------------------------------------------

def job_to_dict(job: BuildJob) -> dict:
    """``job`` as plain JSON data (what ``job_from_dict`` reads back equal): its toolchain by name, a
    stranger's name being resolved on the worker that takes the job."""
    return {"tree": job.tree, "tree_path": job.tree_path, "commit": asdict(job.commit), "toolchain": job.toolchain,
            "targets": list(job.targets),
            "config": {"base": job.config.base, "fragment": list(job.config.fragment), "arch": job.config.arch,
                       "name": job.config.name},
            "mcpu": job.mcpu, "keep_vmlinux": job.keep_vmlinux,
            "measure": None if job.measure is None else {"orders": list(job.measure.orders), "pairs": job.measure.pairs,
                                                         "timeout": job.measure.timeout}}


def _fields(d: Any, what: str, keys: set[str]) -> dict:
    if not isinstance(d, dict):
        raise BadPayload(f"{what} is not an object")
    if set(d) != keys:
        odd = sorted(set(d) ^ keys)
        raise BadPayload(f"{what} has other fields than expected ({', '.join(map(str, odd))[:80]})")
    return d


def _text(v: Any, what: str, pattern: re.Pattern | None = None, empty: bool = False) -> str:
    if not isinstance(v, str) or len(v) > _TEXT_MAX or "\x00" in v or (not v and not empty):
        raise BadPayload(f"{what} is not a string of at most {_TEXT_MAX} characters")
    if pattern is not None and v and not pattern.fullmatch(v):
        raise BadPayload(f"{what} {v[:60]!r} is not of the expected form")
    return v


def _int(v: Any, what: str, lo: int, hi: int, none: bool = False) -> int | None:
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise BadPayload(f"{what} is not a whole number from {lo} to {hi}")
    return v


def _commit(d: Any) -> Commit:
    d = _fields(d, "the commit", {"sha", "parent_sha", "subject", "author", "date", "tree", "id", "generation"})
    return Commit(_text(d["sha"], "the commit's sha", _SHA),
                  None if d["parent_sha"] is None else _text(d["parent_sha"], "the parent's sha", _SHA),
                  _text(d["subject"], "the subject", empty=True), _text(d["author"], "the author", empty=True),
                  _text(d["date"], "the date", empty=True), _text(d["tree"], "the commit's tree", _NAME, empty=True),
                  _int(d["id"], "the commit's id", 0, 2**63 - 1, none=True),
                  _int(d["generation"], "the generation", 0, 2**63 - 1, none=True))


def _config(d: Any) -> Config:
    d = _fields(d, "the config", {"base", "fragment", "arch", "name"})
    lines = d["fragment"]
    if not isinstance(lines, list) or len(lines) > 10_000:
        raise BadPayload("the config's fragment is not a list of config lines")
    from toolchains.registry import ARCHES
    arch = _text(d["arch"], "the config's arch", _NAME)
    if arch not in ARCHES:
        raise BadPayload(f"the config's arch {arch[:60]!r} is none sizewatch builds ({', '.join(ARCHES)})")
    return Config(_text(d["base"], "the config's base", _NAME),
                  tuple(_text(ln, "a config line", _CONFIG_LINE) for ln in lines),
                  arch, _text(d["name"], "the config's name", _NAME, empty=True))


def _measure(d: Any) -> Measure | None:
    if d is None:
        return None
    from toolchains.runtime.measure import MAX_ORDER, MAX_PAIRS
    d = _fields(d, "the measurement", {"orders", "pairs", "timeout"})
    orders = d["orders"]
    if not isinstance(orders, list) or not 1 <= len(orders) <= 16:
        raise BadPayload("the measured orders are not a list of 1 to 16 orders")
    t = d["timeout"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not 0 < t <= 86400:
        raise BadPayload("the measurement's time-out is not a number of seconds up to a day")
    return Measure(tuple(_int(o, "an order", 0, MAX_ORDER) for o in orders), _int(d["pairs"], "pairs", 1, MAX_PAIRS),
                   float(t))


def _job_fields(d: Any) -> dict:
    """``job_to_dict``'s data as ``BuildJob``'s fields, every one checked (``BadPayload`` says what is
    wrong), the toolchain still a name (``toolchain``) where ``BuildJob`` holds it resolved."""
    d = _fields(d, "the job", {"tree", "tree_path", "commit", "toolchain", "targets", "config", "mcpu",
                               "keep_vmlinux", "measure"})
    targets = d["targets"]
    if not isinstance(targets, list) or not 1 <= len(targets) <= 64:
        raise BadPayload("the targets are not a list of 1 to 64 build targets")
    for t in targets:
        if ".." in _text(t, "a target", _TARGET).split("/") or t.startswith("/"):
            raise BadPayload(f"the target {t[:60]!r} leaves the tree")
    tree_path = _text(d["tree_path"], "the tree's path")
    if not tree_path.startswith("/") or any(ord(c) < 32 for c in tree_path):
        raise BadPayload("the tree's path is not an absolute path")
    return {"tree": _text(d["tree"], "the tree", _NAME), "tree_path": tree_path, "commit": _commit(d["commit"]),
            "toolchain": _text(d["toolchain"], "the toolchain", _NAME), "targets": tuple(targets),
            "config": _config(d["config"]), "mcpu": _text(d["mcpu"], "the CPU model", _MCPU),
            "keep_vmlinux": _int(d["keep_vmlinux"], "keep_vmlinux", 0, 1_000_000), "measure": _measure(d["measure"])}


def job_from_dict(d: Any, resolve: Callable[[str, str], ResolvedToolchain] = toolchain_info) -> BuildJob:
    """The ``BuildJob`` of ``job_to_dict``'s data, every field checked (``BadPayload`` says what is wrong),
    its toolchain name resolved for its config's arch by ``resolve`` (on the worker taking the job: a
    ``BuildError`` when that compiler is unknown or not installed there)."""
    f = _job_fields(d)
    return BuildJob(f["tree"], f["tree_path"], f["commit"], resolve(f["toolchain"], f["config"].arch), f["targets"],
                    f["config"], f["mcpu"], f["keep_vmlinux"], f["measure"])


def job_args(job: BuildJob, store: str, version: str) -> list:
    """The arguments a queued job carries: the job, its store's identity, the compiler version."""
    return [job_to_dict(job), store, version]


def check_data(data: Any, allowed: frozenset[str]) -> tuple[str, list]:
    """(function name, arguments) of a job's deserialized data, or ``BadPayload``."""
    if not isinstance(data, list) or len(data) != 4:
        raise BadPayload("its data is not [function, instance, args, kwargs]")
    func, instance, args, kwargs = data
    if not isinstance(func, str) or func not in allowed:
        raise BadPayload(f"it names the function {str(func)[:80]!r}; this worker runs {FUNCTION} only")
    if instance is not None or kwargs != {}:
        raise BadPayload("it carries an instance or keyword arguments")
    if not isinstance(args, list) or len(args) != 3:
        raise BadPayload("its arguments are not [job, store, version]")
    _job_fields(args[0])                   # checked only: its toolchain is resolved by the worker that runs it
    _text(args[1], "the store's identity", _STORE)
    _text(args[2], "the compiler version")
    return func, args


# --- the job class every sizewatch process reads RQ's jobs with -----------------------------------

class SafeJob(Job):
    """RQ's Job that deserializes with JSON only, runs only the functions in ``allowed`` with the
    arguments ``check_data`` accepts, and never imports a callback nor sends a webhook."""

    allowed: ClassVar[frozenset[str]] = frozenset({FUNCTION})   # widened only in-process (bench/queue_bench.py)

    def __init__(self, id: str | None = None, connection=None, serializer=None):
        super().__init__(id, connection=connection, serializer=SERIALIZER)

    def _refuse(self, why: str) -> JobRefused:
        self.retries_left = 0              # a refusal is final: another attempt would be refused the same
        return JobRefused(f"refused job {str(self.id)[:80]}: {why}")

    def _deserialize_data(self) -> None:
        try:
            data = json.loads(self.data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, AttributeError):
            raise self._refuse("its data is not JSON (a pickle is never loaded)") from None
        try:
            func, args = check_data(data, self.allowed)
        except BadPayload as e:
            raise self._refuse(str(e)) from None
        self._func_name, self._instance, self._args, self._kwargs = func, None, args, {}

    @property
    def func(self):
        name = self.func_name              # checked by _deserialize_data
        if self._success_callback_name or self._failure_callback_name or self._stopped_callback_name \
                or self.webhooks:
            raise self._refuse("it carries callbacks or webhooks")
        from rq.utils import import_attribute
        return import_attribute(name) if name in self.allowed else None

    @property
    def success_callback(self):
        return None

    @property
    def failure_callback(self):
        return None

    @property
    def stopped_callback(self):
        return None

    def send_webhooks(self, status, *, exc_string: str | None = None) -> None:
        """Never: a job's webhook URLs are whatever was written into Redis."""


def workers(connection, queue=None) -> list:
    """RQ's registered workers (of ``queue``, else all) that can be read: an entry RQ cannot parse (a
    forged date in a stranger's ``rq:worker:*`` hash) is skipped, where ``Worker.all`` would raise."""
    from redis.exceptions import RedisError
    from rq import worker_registration
    from rq.worker import Worker
    out = []
    for key in sorted(worker_registration.get_keys(queue=queue, connection=connection)):
        try:
            w = Worker.find_by_key(key, connection=connection, job_class=SafeJob, serializer=SERIALIZER)
        except RedisError:
            raise
        except Exception:                  # noqa: BLE001 - whatever RQ makes of a damaged entry: not shown
            continue
        if w is not None:
            out.append(w)
    return out

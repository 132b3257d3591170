"""Builds for the pipeline: one call per (commit, toolchain), results as plain data.

Adapter over toolchains.build so the pipeline does not depend on how builds are run
(incremental make or replay of the object's compile, the inline report in that same
compile, sandboxed, time- and memory-limited). Objects stay where toolchains.build keeps
them: <cache>/objects/<toolchain>/<config>/<sha>/<target>, the report beside each.
"""
from __future__ import annotations

import hashlib
import queue
from contextlib import contextmanager
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from analyzer.errors import SizewatchError
from analyzer.runtime import Runtime
from ci.pipeline.measure import Measure, measure_one
from toolchains import build as tbuild, retention
from toolchains.build import ResolvedToolchain
from toolchains.kbuild import Config
from toolchains.parallel_builds import build_jobs
from toolchains.process import kill_all
from toolchains.targets import is_linked


@dataclass
class Built:
    """What one build of one commit under one toolchain produced."""
    sha: str
    toolchain: str
    compiler_version: str
    family: str
    config_key: str
    config_hash: str
    config_text: str | None
    status: str                                   # ok | failed | timeout | killed
    method: str                                   # cached | reused | replay | kbuild
    seconds: float
    log: str
    errors: list[str]
    objects: dict[str, Path] = field(default_factory=dict)          # target -> object file
    remarks: dict[str, list[Path]] = field(default_factory=dict)    # target -> compiler remark files
    source: Path | None = None                    # a checkout of the commit (for declarations)
    unit_keys: dict[str, dict[str, str]] = field(default_factory=dict)  # vmlinux target -> unit -> key
    runtimes: dict[str, Runtime] = field(default_factory=dict)          # vmlinux target -> its measurement


def config_key(config: Config | None = None) -> str:
    return (config or Config()).key


def checkout(tree: Path, sha: str, toolchain: str, config: Config | None = None) -> Path:
    """The toolchain's worktree at ``sha`` (source for the analyzer's declaration lookups)."""
    return tbuild.checkout(tree, sha, toolchain, config or Config())


@contextmanager
def source_for(tree: Path, sha: str, toolchain: str, config: Config | None = None,
               wanted: bool = True) -> Iterator[Path | None]:
    """The toolchain's worktree at ``sha``, kept there (its builds wait) for the block; None when
    not ``wanted``."""
    if not wanted:
        yield None
        return
    with tbuild.checked_out(tree, sha, toolchain, config or Config()) as path:
        yield path


# A whole kernel takes longer than an object: a first defconfig vmlinux is ~21-23 min with -j2 on two
# cores (more under load), and linking it with DWARF and --emit-relocs takes GBs of address space.
VMLINUX_TIMEOUT = 3 * 3600.0
VMLINUX_MEMORY = 12 << 30


def options_for(targets: list[str], measure: Measure | None = None) -> tbuild.BuildOptions:
    """Build options for a set of targets: the object defaults, or a whole kernel's limits. A vmlinux to
    be measured is built in its build dir even when a kept one could be taken: the measurement's guest
    module is built against the build dir, which must hold this build."""
    if any(is_linked(t) for t in targets):
        return tbuild.BuildOptions(timeout=VMLINUX_TIMEOUT, memory=VMLINUX_MEMORY, use_cache=measure is None)
    return tbuild.BuildOptions()


def prune_vmlinux(tree: Path, toolchain: str, config: Config | None, keep: int,
                  stored: Callable[[str], bool] = lambda sha: True) -> list[Path]:
    """Delete all but the ``keep`` newest kept vmlinux files of (tree, toolchain, config), of the
    commits ``stored(sha)`` says the store already holds."""
    lay = tbuild.layout(tree, toolchain, config or Config(), tbuild.BuildOptions())
    return retention.prune(lay.objects, keep, done=stored)


def build(tree: Path, sha: str, toolchain: ResolvedToolchain, targets: list[str], config: Config | None = None,
          log: Callable[[str], None] = lambda s: None,
          options: tbuild.BuildOptions | None = None, measure: Measure | None = None) -> Built:
    """Build ``targets`` at ``sha``; a failed build is a result (status and the compiler's errors).
    ``measure``: each built vmlinux is measured under emulation right after (``ci.pipeline.measure``)."""
    b = tbuild.build_commit(tree, sha, toolchain, targets, config or Config(), options or tbuild.BuildOptions())
    return _built(b, _unit_keys(b), _runtimes(b, measure))


def build_many(tree: Path, todo: list[tuple[str, ResolvedToolchain, list[str]]], config: Config | None = None,
               options: tbuild.BuildOptions | None = None,
               measure: Measure | None = None) -> Iterator[tuple[tuple[str, str], Built]]:
    """Build every (sha, toolchain, targets) of ``todo``, toolchains in parallel (each one's commits in
    the order given); yields ((sha, toolchain name), Built) as each build finishes, so the caller can
    store results while the others build. ``measure``: as ``build``'s, in each build's thread."""
    jobs: dict[str, tuple[ResolvedToolchain, list[tuple[str, list[str]]]]] = {}
    for sha, tc, targets in todo:
        jobs.setdefault(tc.name, (tc, []))[1].append((sha, targets))
    q: queue.Queue = queue.Queue()
    cancel = threading.Event()

    def run() -> None:
        try:
            build_jobs(tree, jobs, config or Config(), options or tbuild.BuildOptions(),
                       on_build=lambda b: q.put(("built", b, _unit_keys(b), _runtimes(b, measure))), cancel=cancel)
        except BaseException as e:          # handed to the consumer, raised there
            q.put(("error", e))
        finally:
            q.put(("end", None))

    worker = threading.Thread(target=run, name="pipeline-builds", daemon=True)
    worker.start()
    try:
        while True:
            kind, item, *keys = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield (item.sha, item.toolchain), _built(item, *keys)
    finally:
        if worker.is_alive():               # the consumer stopped early: stop the builds too
            cancel.set()
            kill_all()
            worker.join()


def _unit_keys(b: tbuild.CommitBuild) -> dict[str, dict[str, str]]:
    """Per vmlinux target, its units' object hashes (ci.pipeline.unit_cache): taken in the build's
    thread before the next build of that build dir starts, while its objects are the ones linked."""
    from ci.pipeline.unit_cache import object_keys
    out = {}
    for r in b.targets:
        if r.ok and r.path is not None and is_linked(r.target):
            try:
                keys = object_keys(r.path, b.build_dir, b.worktree)
            except (SizewatchError, OSError):     # no keys: the vmlinux is decoded whole
                keys = None
            if keys:
                out[r.target] = keys
    return out


def _runtimes(b: tbuild.CommitBuild, measure: Measure | None) -> dict[str, Runtime]:
    """Per built vmlinux target, its measurement under emulation (none unless ``measure``): taken in the
    build's thread, before the next build of that build dir starts (``ci.pipeline.measure``)."""
    if measure is None:
        return {}
    return {r.target: measure_one(b.build_dir, r.path, b.toolchain, measure) for r in b.targets
            if r.ok and r.path is not None and is_linked(r.target)}


def _built(b: tbuild.CommitBuild, unit_keys: dict[str, dict[str, str]] | None = None,
           runtimes: dict[str, Runtime] | None = None) -> Built:
    logs = []
    for r in b.targets:
        if r.log is not None and r.log.exists():
            logs.append(r.log.read_text(errors="replace"))
    text = b.config_text
    return Built(b.sha, b.toolchain, b.compiler_version, b.family, b.config.key,
                 hashlib.sha256(text.encode()).hexdigest() if text else "", text, b.status, b.method,
                 b.seconds, "\n".join(logs), b.errors,
                 {r.target: r.path for r in b.targets if r.ok and r.path is not None},
                 {r.target: [r.report] for r in b.targets if r.ok and r.report is not None},
                 unit_keys=unit_keys or {}, runtimes=runtimes or {})

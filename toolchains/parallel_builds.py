"""Commits × toolchains: every toolchain's builds in parallel, up to the core count.

Each toolchain works through the commits in order in its own build dir (the order matters:
each commit is built incrementally on top of the one before). Toolchains are independent,
so they run side by side; make's -j is the core count divided among them. A failed,
timed-out or killed build is a result like any other and the rest go on.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable

from toolchains import process
from toolchains.build import BuildOptions, CommitBuild, Event, ResolvedToolchain, build_commit, toolchain_info
from toolchains.kbuild import Config
from toolchains.targets import parse


def build_matrix(tree: Path, commits: list[str], toolchains: list[str], targets: list[str],
                 config: Config = Config(), options: BuildOptions = BuildOptions(),
                 events: Callable[[Event], None] = lambda e: None,
                 on_build: Callable[[CommitBuild], None] = lambda b: None,
                 parallel: int | None = None) -> list[CommitBuild]:
    """Build every commit under every toolchain; results ordered by commit, then toolchain.

    The toolchain names are looked up here, once (unknown or missing toolchains fail before any work,
    as do bad targets).
    """
    jobs = {tc: (toolchain_info(tc, config.arch), [(sha, list(targets)) for sha in commits]) for tc in toolchains}
    done = {(b.sha, b.toolchain): b for b in build_jobs(tree, jobs, config, options, events, on_build, parallel)}
    return [done[(sha, tc)] for sha in commits for tc in toolchains if (sha, tc) in done]


def build_jobs(tree: Path, jobs: dict[str, tuple[ResolvedToolchain, list[tuple[str, list[str]]]]],
               config: Config = Config(), options: BuildOptions = BuildOptions(),
               events: Callable[[Event], None] = lambda e: None,
               on_build: Callable[[CommitBuild], None] = lambda b: None, parallel: int | None = None,
               cancel: threading.Event | None = None) -> list[CommitBuild]:
    """The general form: per toolchain name, the toolchain as resolved and its (commit, targets) in
    order; toolchains side by side. ``on_build`` is called (under a lock) as each build finishes;
    ``cancel`` stops after the builds under way."""
    for _, work in jobs.values():
        for _, targets in work:
            for t in targets:
                parse(t)
    cores = os.cpu_count() or 1
    workers = max(1, min(len(jobs), parallel or cores))
    if options.jobs is None:
        options = replace(options, jobs=max(1, cores // workers))
    cancel = cancel or threading.Event()
    lock = threading.Lock()
    done: list[CommitBuild] = []

    def one_toolchain(tc: str) -> None:
        compiler, work = jobs[tc]
        for sha, targets in work:
            if cancel.is_set():
                return
            b = build_commit(tree, sha, compiler, targets, config, options, events)
            with lock:
                done.append(b)
                on_build(b)

    pool = ThreadPoolExecutor(workers, thread_name_prefix="build")
    futures = [pool.submit(one_toolchain, tc) for tc in jobs]
    try:
        for f in futures:
            f.result()
    except BaseException:
        cancel.set()
        process.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return done

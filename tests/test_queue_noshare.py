"""Workers that share no disk with the coordinator (issue 27, section 1): a commit ``git am`` made in
the coordinator's Debian tree reaches a worker's own tree as a git bundle in the store.

The mechanism on small trees made the way ``toolchains.source`` makes Debian's (the same root
commit sha wherever they are made): the coordinator's ``publish`` writes a bundle per commit, a
worker's ``local_tree`` builds in the job's path when it holds the commit (one host, as before) and
else fetches the bundle into its own tree under its own cache, checked (a damaged bundle, one whose
head is another commit, a tree given by path the worker lacks: one line each, nothing fetched).
The store keeps bundles on sqlite and PostgreSQL alike, at most 64 MiB each.

Then the whole of it (``slow``, ``kernel``): the example series through two workers, one per
toolchain, each in its own mount namespace with private tmpfs over the coordinator's cache, over
``~/.cache`` and over the other worker's directory, its own ``SIZEWATCH_CACHE`` and ``HOME``
(its own Debian tree unpacked, its own builds), writing into PostgreSQL: the report is the
in-process run's on sqlite, byte for byte.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from buildtrees import commit_on, git
from isolation import isolated
from test_queue import redis  # noqa: F401  (the fixture)
from ci.pipeline.run import BuildJob
from toolchains.build import toolchain_info
from ci.queue.names import QueueError
from ci.queue.trees import local_tree, publish
from db.models import Commit
from db.store import MAX_BUNDLE, open_store
from db.errors import StoreError
from toolchains.bundle import REF
from toolchains.source import READY_MARK

VERSION = "9.9"          # no such Debian version: ensure_source finds the tree made here, never a tarball


def debian_like(cache: Path) -> tuple[Path, str]:
    """``cache/linux-9.9`` as ensure_source leaves a tree: one pinned root commit and its ready mark."""
    tree = cache / f"linux-{VERSION}"
    tree.mkdir(parents=True)
    (tree / "Makefile").write_text("all:\n")
    (tree / "mm").mkdir()
    (tree / "mm" / "page_alloc.c").write_text("int x;\n")
    git(tree, "init", "-q", "-b", "master")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "linux-source as shipped")
    (tree / READY_MARK).write_text(VERSION + "\n")
    return tree, git(tree, "rev-parse", "HEAD")


def job(tree: Path, sha: str, name: str = f"linux-{VERSION}") -> BuildJob:
    return BuildJob(name, str(tree), Commit(sha, tree=name), toolchain_info("gcc-12"), ("mm/page_alloc.o",))


@pytest.fixture
def hosts(tmp_path, monkeypatch):
    """(coordinator's tree, its root, two series commits, the worker's own cache): the worker's
    SIZEWATCH_CACHE is another directory, where its own identical Debian tree is made."""
    coord, root = debian_like(tmp_path / "coordinator")
    one = commit_on(coord, root, {"mm/page_alloc.c": "int x = 1;\n"}, "mm: one")
    two = commit_on(coord, one, {"mm/page_alloc.c": "int x = 2;\n", "mm/new.c": "int y;\n"}, "mm: two")
    mine = tmp_path / "worker"
    _, root_there = debian_like(mine)
    assert root_there == root                     # made the same way, the same root sha
    monkeypatch.setenv("SIZEWATCH_CACHE", str(mine))
    return coord, root, one, two, mine


def test_a_worker_fetches_the_commits_from_the_store_into_its_own_tree(hosts, tmp_path):
    coord, root, one, two, mine = hosts
    with open_store(tmp_path / "s.db") as st:
        jobs = [job(coord, sha) for sha in (root, one, two)] * 2
        assert publish(st, jobs) == 2             # the root needs none, each commit once
        assert publish(st, jobs) == 0             # kept: not written again
        shutil.rmtree(coord)                      # the coordinator's disk is not this worker's
        for sha in (two, one):                    # the later commit first: its bundle carries both
            got = local_tree(job(coord, sha), lambda sha=sha: st.bundle_for(f"linux-{VERSION}", sha))
            assert got == mine / f"linux-{VERSION}"
            assert git(got, "rev-parse", f"{sha}^{{commit}}") == sha
        assert git(got, "show", f"{two}:mm/new.c") == "int y;"


def test_one_host_builds_in_the_jobs_tree_without_reading_the_store(hosts):
    coord, _, one, _, _ = hosts

    def no_store():
        raise AssertionError("the store was read")
    assert local_tree(job(coord, one), no_store) == coord


@pytest.mark.parametrize("damage", ["another head", "truncated", "not a bundle", "none stored"])
def test_a_bad_bundle_is_one_line_and_nothing_is_fetched(hosts, tmp_path, damage):
    coord, root, one, two, mine = hosts
    with open_store(tmp_path / "s.db") as st:
        publish(st, [job(coord, one), job(coord, two)])
        good = st.bundle_for(f"linux-{VERSION}", two)
        data = {"another head": st.bundle_for(f"linux-{VERSION}", one), "truncated": good[:-40],
                "not a bundle": b"#!/bin/sh\nrm -rf /\n", "none stored": None}[damage]
    gone = tmp_path / "elsewhere" / f"linux-{VERSION}"
    with pytest.raises(QueueError) as e:
        local_tree(job(gone, two), lambda: data)
    line = str(e.value)
    assert "\n" not in line and two[:12] in line
    tree = mine / f"linux-{VERSION}"
    assert not git(tree, "for-each-ref", REF)     # no ref left behind
    assert subprocess.run(["git", "-C", str(tree), "cat-file", "-e", f"{two}^{{commit}}"]).returncode != 0


def test_a_tree_given_by_path_that_the_worker_lacks_is_refused_in_one_line(hosts, tmp_path):
    coord, _, one, _, _ = hosts
    with pytest.raises(QueueError, match=r"^mytree: this worker needs that tree at /nowhere/mytree holding "
                                         + one[:12]):
        local_tree(job(Path("/nowhere/mytree"), one, "mytree"), lambda: pytest.fail("read the store"))


def test_a_users_tree_is_not_bundled(hosts, tmp_path):
    coord, _, one, _, _ = hosts
    (coord / READY_MARK).unlink()                 # a tree of the user's: workers need it at its path
    with open_store(tmp_path / "s.db") as st:
        assert publish(st, [job(coord, one)]) == 0


def test_the_store_keeps_bundles_up_to_64_mib(store_db):
    with open_store(store_db) as st:
        st.record_bundle("linux-6.1", "a" * 40, "b" * 40, b"\x00bundle\xff")
        st.record_bundle("linux-6.1", "a" * 40, "b" * 40, b"another")      # a sha names its content: kept
        assert st.bundle_for("linux-6.1", "a" * 40) == b"\x00bundle\xff"
        assert st.bundle_for("linux-6.1", "c" * 40) is None and st.bundle_for("linux-6.2", "a" * 40) is None
        with pytest.raises(StoreError, match="over the 67108864"):
            st.record_bundle("linux-6.1", "d" * 40, "b" * 40, bytes(MAX_BUNDLE + 1))


# --- the example series through two workers that share no disk --------------------------------------

@pytest.mark.slow
@pytest.mark.kernel
@pytest.mark.timeout(3600)
def test_example_series_through_two_workers_without_a_shared_disk(example_store, redis, pg_url, tmp_path):
    """Each worker has only the Redis URL, the store's URL and its own disk: the coordinator's cache
    (its tree with the series applied, its build dirs), ~/.cache and the other worker's directory are
    empty tmpfs to it. Each unpacks its own Debian tree, fetches the series from the store's bundles and
    builds its toolchain's three commits; the report is the in-process run's on sqlite, byte for byte."""
    from conftest import EXAMPLE_MBOX, sizewatch_cmd
    from test_pg_store import _first_difference, _without_times, sw
    from test_queue import coordinator, finished, kill_tree, logs, make_store, status, wait_for
    from toolchains.source import cache_dir
    ref_db, ref = example_store
    coord_cache = cache_dir()
    dirs = {tc: tmp_path / f"worker-{tc}" for tc in ("gcc-12", "clang-19")}
    make_store(pg_url)
    procs = []
    for d in dirs.values():
        (d / "home").mkdir(parents=True)             # all made before any is hidden from the other
    try:
        for i, (tc, d) in enumerate(dirs.items()):
            hide = [coord_cache, Path.home() / ".cache", *(o for o in dirs.values() if o != d)]
            env = {**os.environ, "HOME": str(d / "home"), "SIZEWATCH_CACHE": str(d / "cache")}
            probe = subprocess.run(isolated(["sh", "-c", 'test ! -e "$0/linux-6.1" && find "$@" -mindepth 1',
                                             str(coord_cache), str(Path.home() / ".cache"), *map(str, hide[2:])],
                                            hide), capture_output=True, text=True, env=env)
            assert probe.returncode == 0 and probe.stdout == "", probe       # nothing of theirs to see
            cmd = [*sizewatch_cmd(), "worker", "--toolchains", tc, "--redis", redis.url, "--db", pg_url,
                   "--heartbeat", "5"]
            with open(tmp_path / f"worker{i}.log", "w") as log:
                procs.append(subprocess.Popen(isolated(cmd, hide), stdout=log, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))
        wait_for(lambda: len(status(redis)["workers"]) == 2, what="two workers registered")
        p = coordinator(["--series", EXAMPLE_MBOX, "--toolchains", "gcc-12,clang-19"], pg_url, redis, tmp_path)
        rc, out, err = finished(p, tmp_path, timeout=3000)
        assert rc == 0, err + logs(tmp_path)
        assert "6 built, 0 re-analyzed, 0 already stored, 0 failed" in err
        assert "queue: 2 commit(s) written to the store as git bundles" in err
        assert out == ref.stdout, logs(tmp_path)                  # the report, byte for byte
        a, b = sw("report", "1", "--json", "--db", ref_db), sw("report", "1", "--json", "--db", pg_url)
        assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
        a_doc, b_doc = (_without_times(__import__("json").loads(x.stdout)) for x in (a, b))
        assert b_doc == a_doc, _first_difference(a_doc, b_doc)
        st = status(redis)
        assert sorted(w["done"] for w in st["workers"]) == [3, 3] and not st["parked"]
        # each built in its own tree, fetched from the store: the series' two commits, its own objects
        with open_store(ref_db, read_only=True) as ref_store:
            (series,) = ref_store.list_series()
        patches = [pt.commit_sha for pt in series.patches]
        for tc, d in dirs.items():
            tree = d / "cache" / "linux-6.1"
            assert sorted(git(tree, "for-each-ref", "--format=%(objectname)", REF).split()) == sorted(patches)
            for sha in [series.base_sha, *patches]:
                assert list((d / "cache" / "objects" / tc).glob(f"*/{sha}/mm/page_alloc.o")), (tc, sha)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
                proc.wait()
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)      # gigabytes: two kernel trees and their build dirs

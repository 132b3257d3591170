"""The deployment mode's queue (ci.queue): ``sizewatch run --queue`` with ``sizewatch worker``
processes on a real redis-server started here (a unix socket in a temporary directory).

The example series through two workers prints the in-process run's report byte for byte. The
faults run on the fake kernel (tests/fakekernel: real compilers, builds in a fraction of a second)
with its own cache, a commit whose compile sleeps giving a window "mid-build": a worker killed
with SIGKILL there (its job runs again on the other worker), Redis emptied with jobs queued and
running (the coordinator enqueues what the store lacks), one job delivered twice, a job that kills
every worker's work horse (parked after its attempts, reported by the run and ``queue status``),
and the store unavailable while a finished build waits to be written (the worker tries again).
Every test ends with exactly one stored build per key. A worker writing to another store, or holding
another version of the compiler, refuses the job (parked, said); ``bot --queue`` with a parked job
is an infrastructure failure (nothing mailed), tested and mailed at the next poll once unparked.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from buildtrees import commit_on, edit, fake_tree
from conftest import EXAMPLE_MBOX, EXAMPLE_TOOLCHAINS, sizewatch_cmd
from redisserver import RedisServer

FAKE_TCS = "gcc-12,clang-19"
HEARTBEAT = "1"                  # a killed worker's job is free again after 2*1+5 s


@pytest.fixture
def redis(tmp_path):
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


class Workers:
    """``sizewatch worker`` processes, each in its own session; all stopped at the end."""

    def __init__(self, tmp: Path, redis: RedisServer, db: Path, env: dict | None = None):
        self.tmp, self.redis, self.db, self.env = tmp, redis, db, {**os.environ, **(env or {})}
        self.procs: list[subprocess.Popen] = []

    def start(self, n: int = 1, toolchains: str = FAKE_TCS, db: Path | None = None, store_args: list | None = None,
              **env: str) -> list[subprocess.Popen]:
        """``n`` workers on ``--db DB`` (a file), or on ``store_args`` (``[]``: $SIZEWATCH_DB in ``env``)."""
        out = []
        store = ["--db", str(db or self.db)] if store_args is None else [str(a) for a in store_args]
        for _ in range(n):
            i = len(self.procs)
            log = open(self.tmp / f"worker{i}.log", "w")
            p = subprocess.Popen([*sizewatch_cmd(), "worker", "--toolchains", toolchains, "--redis", self.redis.url,
                                  *store, "--heartbeat", HEARTBEAT, "--store-retries", "6"],
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                 env={**self.env, **env})
            log.close()
            self.procs.append(p)
            out.append(p)
        wait_for(lambda: len(status(self.redis)["workers"]) >= len([p for p in self.procs if p.poll() is None]),
                 what="workers registered")
        return out

    def log(self, i: int) -> str:
        return (self.tmp / f"worker{i}.log").read_text(errors="replace")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                kill_tree(p.pid)
                p.wait()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc), whatever session or group it moved to."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a worker and everything it started (its work horse, make, the compiler): a lost machine."""
    for p in [pid, *descendants(pid)]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(cond, timeout: float = 120, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def status(redis: RedisServer) -> dict:
    p = subprocess.run([*sizewatch_cmd(), "queue", "status", "--redis", redis.url, "--json"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def coordinator(args: list, db: Path, redis: RedisServer, tmp: Path, env: dict | None = None,
                name: str = "run") -> subprocess.Popen:
    return subprocess.Popen([*sizewatch_cmd(), "run", *map(str, args), "--queue", redis.url, "--db", str(db)],
                            stdout=open(tmp / f"{name}.out", "w"), stderr=open(tmp / f"{name}.err", "w"),
                            env={**os.environ, **(env or {})}, start_new_session=True)


def logs(tmp: Path) -> str:
    """The workers' logs (their last lines), for a failing assertion's message."""
    return "\n".join(f"--- {f.name}:\n" + f.read_text(errors="replace")[-3000:] for f in sorted(tmp.glob("worker*.log")))


def finished(p: subprocess.Popen, tmp: Path, name: str = "run", timeout: float = 300) -> tuple[int, str, str]:
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_tree(p.pid)
        raise AssertionError(f"the coordinator did not finish: {(tmp / f'{name}.err').read_text()}\n{logs(tmp)}")
    return p.returncode, (tmp / f"{name}.out").read_text(), (tmp / f"{name}.err").read_text()


def same_text(got: str, want: str) -> None:
    if got != want:
        import difflib
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "in-process", "queued", n=2))
        raise AssertionError(f"the queued run's report differs from the in-process one:\n{diff[:4000]}")


def build_keys(db: Path) -> list[tuple]:
    """(commit, toolchain, version, config, target) of every stored build, with duplicates."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute("""SELECT c.sha, tc.name, tc.version, cf.key, b.target FROM builds b
                               JOIN commits c ON c.id = b.commit_id JOIN toolchains tc ON tc.id = b.toolchain_id
                               JOIN configs cf ON cf.id = b.config_id ORDER BY 1, 2, 5""").fetchall()
    finally:
        conn.close()


def make_store(db: Path) -> None:
    """An empty store (the coordinator's own, made before the workers that write into it start)."""
    from db.store import open_store
    open_store(db).close()


# --- the example series: same report as in-process ----------------------------------------------

@pytest.mark.kernel
def test_example_series_through_two_workers_gives_the_in_process_report(example_store, redis, tmp_path):
    ref_db, ref = example_store
    db = tmp_path / "store.db"
    make_store(db)
    workers = Workers(tmp_path, redis, db)
    try:
        workers.start(2, EXAMPLE_TOOLCHAINS)
        p = coordinator(["--series", EXAMPLE_MBOX, "--toolchains", EXAMPLE_TOOLCHAINS], db, redis, tmp_path)
        rc, out, err = finished(p, tmp_path, timeout=600)
        assert rc == 0, err
        assert out == ref.stdout                       # the report, byte for byte
        assert "6 built, 0 re-analyzed, 0 already stored, 0 failed" in err
        st = status(redis)
        assert [w["toolchains"] for w in st["workers"]] == [["clang-19", "gcc-12"]] * 2
        assert sum(w["done"] for w in st["workers"]) == 6 and not st["parked"] and not st["running"]
        assert {q["name"] for q in st["queues"]} == {"sizewatch:gcc-12", "sizewatch:clang-19"}
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 6
        assert keys == build_keys(ref_db)
        # a second queued run finds everything stored: nothing enqueued, the same report
        p = coordinator(["--series", EXAMPLE_MBOX, "--toolchains", EXAMPLE_TOOLCHAINS], db, redis, tmp_path, name="again")
        rc, again, err = finished(p, tmp_path, "again")
        assert rc == 0 and again == out and "0 built, 0 re-analyzed, 6 already stored" in err
    finally:
        workers.stop()


@pytest.mark.kernel
def test_example_series_through_two_workers_into_postgresql(example_store, redis, pg_url, tmp_path):
    """The deployment mode whole: two workers writing to PostgreSQL give the report of the
    in-process run on sqlite, byte for byte, and the store holds one build per key."""
    _, ref = example_store
    make_store(pg_url)
    workers = Workers(tmp_path, redis, pg_url)
    try:
        workers.start(2, EXAMPLE_TOOLCHAINS)
        p = coordinator(["--series", EXAMPLE_MBOX, "--toolchains", EXAMPLE_TOOLCHAINS], pg_url, redis, tmp_path)
        rc, out, err = finished(p, tmp_path, timeout=600)
        assert rc == 0, err + logs(tmp_path)
        same_text(out, ref.stdout)
        assert "6 built, 0 re-analyzed, 0 already stored, 0 failed" in err
        st = status(redis)
        assert sum(w["done"] for w in st["workers"]) == 6 and not st["parked"] and not st["running"]
        import psycopg
        with psycopg.connect(pg_url) as conn:
            n, keys = conn.execute("SELECT count(*), count(DISTINCT (commit_id, toolchain_id, config_id, target)) "
                                   "FROM builds").fetchone()
        assert n == keys == 6
    finally:
        workers.stop()


# --- the faults, on the fake kernel ---------------------------------------------------------------

@pytest.fixture
def fake(tmp_path):
    """A fake kernel tree with base → one → slow (its compile sleeps after leaving a mark) → two,
    its own cache and an empty store: (tree, commits, env, store)."""
    tree, base = fake_tree(tmp_path / "linux-fake")
    c = {"base": base}
    c["one"] = commit_on(tree, base, {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1", "* 5 + 2")},
                         "mm: one")
    c["slow"] = commit_on(tree, c["one"], {"Makefile": edit(tree, base, "Makefile", "./tools/objtool/objtool $@",
                                                            "touch $@.sleeping ; sleep 4 ; ./tools/objtool/objtool $@")},
                          "kbuild: a slow compile")
    c["two"] = commit_on(tree, c["slow"], {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1", "* 7 + 2")},
                         "mm: two")
    env = {"SIZEWATCH_CACHE": str(tmp_path / "cache")}
    db = tmp_path / "store.db"
    make_store(db)
    return tree, c, env, db


def fake_range(tree: Path, c: dict, to: str = "two") -> list:
    return ["--tree", tree, f"{c['base']}..{c[to]}", "--toolchains", FAKE_TCS]


def sleeping(cache: Path) -> list[Path]:
    return list(cache.rglob("*.sleeping"))


def in_process_report(tree: Path, c: dict, env: dict, tmp: Path) -> str:
    p = subprocess.run([*sizewatch_cmd(), "run", *map(str, fake_range(tree, c)), "--db", str(tmp / "inproc.db")],
                       capture_output=True, text=True, env={**os.environ, **env, "SIZEWATCH_CACHE": str(tmp / "cache2")},
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_worker_killed_mid_build_job_runs_again_elsewhere(fake, redis, tmp_path):
    tree, c, env, db = fake
    workers = Workers(tmp_path, redis, db, env)
    try:
        procs = workers.start(2)
        run = coordinator(fake_range(tree, c), db, redis, tmp_path, env)
        marks = wait_for(lambda: sleeping(Path(env["SIZEWATCH_CACHE"])), what="a compile under way")
        # the worker running the slow commit's job: kill it and everything it started
        running = wait_for(lambda: [j for j in status(redis)["running"] if c["slow"][:12] in j["description"]],
                           what="the slow job in the started registry")
        victim = next((p for p in procs if str(running[0]["worker"]).endswith(f".{p.pid}")), None)
        assert victim is not None, (running, [p.pid for p in procs])
        kill_tree(victim.pid)
        victim.wait()
        rc, out, err = finished(run, tmp_path)
        assert rc == 0, err + logs(tmp_path)
        assert marks                                  # it was killed in the middle of the compile
        same_text(out, in_process_report(tree, c, env, tmp_path))
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 8       # 4 commits x 2 toolchains, one result each
        survivor = next(p for p in procs if p is not victim)
        st = status(redis)
        assert any(w["name"].endswith(f".{survivor.pid}") and w["done"] >= 1 for w in st["workers"]), st
        assert not st["parked"]
    finally:
        workers.stop()


def test_redis_emptied_mid_run_store_lacks_are_enqueued_again(fake, redis, tmp_path):
    tree, c, env, db = fake
    workers = Workers(tmp_path, redis, db, env)
    try:
        run = coordinator(fake_range(tree, c), db, redis, tmp_path, env)
        # no worker yet: the jobs wait in the queues; Redis loses them all
        wait_for(lambda: sum(q["queued"] for q in status(redis)["queues"]) == 8, what="8 jobs queued")
        redis.client().flushall()
        workers.start(2)
        # and again while a build runs
        wait_for(lambda: sleeping(Path(env["SIZEWATCH_CACHE"])), what="a compile under way")
        redis.client().flushall()
        rc, out, err = finished(run, tmp_path)
        assert rc == 0, err + logs(tmp_path)
        assert "the queue lost this job (Redis restarted or emptied): enqueued again" in err
        same_text(out, in_process_report(tree, c, env, tmp_path))
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 8
        assert all(p.poll() is None for p in workers.procs), logs(tmp_path)      # the workers lived through it
    finally:
        workers.stop()


def test_redis_restarted_empty_the_coordinator_waits_and_enqueues_again(fake, redis, tmp_path):
    tree, c, env, db = fake
    workers = Workers(tmp_path, redis, db, env)
    try:
        run = coordinator(fake_range(tree, c, "one"), db, redis, tmp_path, env)
        wait_for(lambda: sum(q["queued"] for q in status(redis)["queues"]) == 4, what="4 jobs queued")
        redis.stop()
        wait_for(lambda: "Redis unreachable" in (tmp_path / "run.err").read_text(), what="the coordinator noticing")
        redis.start()                             # the same socket, nothing in it
        workers.start(1)
        rc, out, err = finished(run, tmp_path)
        assert rc == 0, err
        assert err.count("the queue lost this job (Redis restarted or emptied): enqueued again") == 4
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 4
    finally:
        workers.stop()


def test_duplicate_delivery_gives_one_result(fake, redis, tmp_path):
    tree, c, env, db = fake
    workers = Workers(tmp_path, redis, db, env)
    try:
        run = coordinator(fake_range(tree, c), db, redis, tmp_path, env)
        wait_for(lambda: sum(q["queued"] for q in status(redis)["queues"]) == 8, what="8 jobs queued")
        # every job delivered twice: its id pushed onto its queue a second time, as a requeue racing a
        # worker would
        r = redis.client()
        for q in ("rq:queue:sizewatch:gcc-12", "rq:queue:sizewatch:clang-19"):
            ids = r.lrange(q, 0, -1)
            assert len(ids) == 4
            r.rpush(q, *ids)
        workers.start(2)
        rc, out, err = finished(run, tmp_path)
        assert rc == 0, err
        # both deliveries of every job ran (the second finds the key stored, or loses the race to
        # write it): one result each
        wait_for(lambda: sum(w["done"] for w in status(redis)["workers"]) == 16, what="16 executions")
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 8
        same_text(out, in_process_report(tree, c, env, tmp_path))
    finally:
        workers.stop()


def test_poisoned_job_is_parked_and_reported(fake, redis, tmp_path):
    tree, c, env, db = fake
    workers = Workers(tmp_path, redis, db, env)
    try:
        # every worker's horse dies on the 'two' commit's jobs (SIGKILL, as a crashing compiler would)
        workers.start(2, SIZEWATCH_QUEUE_KILL_AT=c["two"][:12])
        run = coordinator([*fake_range(tree, c), "--attempts", "2"], db, redis, tmp_path, env)
        rc, out, err = finished(run, tmp_path)
        assert rc == 1
        parked = [ln for ln in err.splitlines() if "parked after 2 attempt(s)" in ln]
        assert len(parked) == 2 and all(c["two"][:12] in ln for ln in parked), err
        assert "Work-horse terminated unexpectedly" in err
        assert err.rstrip().endswith("2 build job(s) parked: the report lacks their builds (sizewatch queue status)")
        assert f"=== {c['one'][:12]}" in out and f"=== {c['two'][:12]}" in out     # the rest is reported
        st = status(redis)
        assert sorted(j["description"] for j in st["parked"]) == [f"clang-19 {c['two'][:12]} mm/page_alloc.o",
                                                                  f"gcc-12 {c['two'][:12]} mm/page_alloc.o"]
        assert sum(q["parked"] for q in st["queues"]) == 2
        text = subprocess.run([*sizewatch_cmd(), "queue", "status", "--redis", redis.url], capture_output=True,
                              text=True).stdout
        assert f"gcc-12 {c['two'][:12]} mm/page_alloc.o: Work-horse terminated unexpectedly" in text
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 6 and not any(k[0] == c["two"] for k in keys)
        # a later run does not run a parked job again ...
        again = coordinator(fake_range(tree, c), db, redis, tmp_path, env, name="again")
        rc, _, err = finished(again, tmp_path, "again", timeout=60)
        assert rc == 1 and "parked after" in err
        # ... until it is unparked; a healthy worker then builds it
        workers.stop()
        p = subprocess.run([*sizewatch_cmd(), "queue", "unpark", "--all", "--redis", redis.url], capture_output=True,
                           text=True)
        assert p.returncode == 0 and "unparked 2 job(s)" in p.stdout
        workers.procs.clear()
        workers.start(1)
        third = coordinator(fake_range(tree, c), db, redis, tmp_path, env, name="third")
        rc, out, err = finished(third, tmp_path, "third")
        assert rc == 0, err
        same_text(out, in_process_report(tree, c, env, tmp_path))
        assert len(build_keys(db)) == 8
    finally:
        workers.stop()


def test_store_unavailable_worker_keeps_the_result_and_writes_later(fake, redis, tmp_path):
    tree, c, env, db = fake
    link = tmp_path / "store-link.db"            # the worker reaches the store through this name
    link.symlink_to(db)
    workers = Workers(tmp_path, redis, link, env)
    try:
        workers.start(1)
        run = coordinator(fake_range(tree, c, "slow"), db, redis, tmp_path, env)
        wait_for(lambda: sleeping(Path(env["SIZEWATCH_CACHE"])), what="a compile under way")
        link.unlink()                             # the store goes away while the slow build runs ...
        wait_for(lambda: "store unavailable" in workers.log(0), timeout=60, what="the worker meeting it")
        time.sleep(1.5)
        link.symlink_to(db)                       # ... and comes back
        rc, out, err = finished(run, tmp_path)
        assert rc == 0, err
        log = workers.log(0)
        assert f"{c['slow'][:12]} gcc-12: store unavailable" in log or f"{c['slow'][:12]} clang-19: store unavailable" in log
        assert "trying again in" in log
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 6
        assert not status(redis)["parked"]
    finally:
        workers.stop()


def test_bad_queue_input_is_one_line(tmp_path, redis):
    db = tmp_path / "s.db"
    for args, want in [
        (["run", "HEAD~1..HEAD", "--queue", "http://x", "--db", db], "not a Redis URL"),
        (["queue", "status", "--redis", "redis://127.0.0.1:1/0"], "cannot reach Redis"),
        (["worker", "--toolchains", "gcc-12", "--redis", redis.url, "--db", tmp_path / "missing.db"], "no such store"),
        (["worker", "--toolchains", "gcc-99", "--redis", redis.url, "--db", db], "gcc-99"),
        (["queue", "unpark", "--redis", redis.url, "nope"], "not parked: nope"),
    ]:
        if args[0] == "worker" and "missing" not in str(args[-1]):
            make_store(db)
        p = subprocess.run([*sizewatch_cmd(), *map(str, args)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and want in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr


@pytest.mark.kernel
def test_bot_hands_its_builds_to_the_workers(example_store, redis, tmp_path):
    """``sizewatch bot --queue``: the series' builds are done by the workers and the mail the bot
    composes is the one it composes building in-process."""
    from botlist import bot_config

    def body(text: str) -> str:           # the mails without the headers that carry times and ids
        return "\n".join(ln for ln in text.splitlines()
                         if not ln.startswith(("From ", "Date:", "Message-ID:", "Message-Id:")))

    cfg = bot_config(tmp_path / "bot.toml")
    db = tmp_path / "store.db"
    make_store(db)
    workers = Workers(tmp_path, redis, db)
    try:
        workers.start(2, EXAMPLE_TOOLCHAINS)
        queued = subprocess.run([*sizewatch_cmd(), "bot", "--series", EXAMPLE_MBOX, "--policy", cfg, "--dry-run",
                                 "--queue", redis.url, "--db", db], capture_output=True, text=True, timeout=600)
        assert queued.returncode == 0, queued.stderr
        assert "queue: 6 job(s)" in queued.stderr
        assert sum(w["done"] for w in status(redis)["workers"]) == 6
    finally:
        workers.stop()
    local = subprocess.run([*sizewatch_cmd(), "bot", "--series", EXAMPLE_MBOX, "--policy", cfg, "--dry-run",
                            "--db", tmp_path / "local.db"], capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr
    assert "Subject: " in queued.stdout and body(queued.stdout) == body(local.stdout)


# --- the README's refusals: a worker that cannot give the coordinator what it waits for --------------

def _parked_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "parked after 1 attempt(s)" in ln]


def test_a_worker_writing_to_another_store_refuses_the_job(fake, redis, tmp_path):
    """The README: a worker that writes to another store than the coordinator reads refuses the job
    with that said (instead of storing a result nobody reads); the job is parked after its attempts
    and shown in ``queue status``."""
    tree, c, env, db = fake
    other = tmp_path / "other.db"
    make_store(other)
    workers = Workers(tmp_path, redis, db, env)
    try:
        workers.start(1, db=other)
        run = coordinator([*fake_range(tree, c, "one"), "--attempts", "1"], db, redis, tmp_path, env)
        rc, out, err = finished(run, tmp_path)
        assert rc == 1, err
        parked = _parked_lines(err)
        assert len(parked) == 4, err + logs(tmp_path)            # 2 commits x 2 toolchains, none built
        assert all("other.db" in ln and "store" in ln for ln in parked), parked
        assert build_keys(db) == [] and build_keys(other) == []  # refused, not stored anywhere
        st = status(redis)
        assert len(st["parked"]) == 4
        assert all("other.db" in json.dumps(j) for j in st["parked"]), st["parked"]
    finally:
        workers.stop()


def test_a_worker_with_another_compiler_version_refuses_the_job(fake, redis, tmp_path):
    """The README: a worker holding another version of the compiler than the coordinator refuses the
    job with that said; parked after its attempts, shown in ``queue status``. The worker's gcc-12
    is the real one behind a wrapper that reports another version."""
    tree, c, env, db = fake
    wrap = tmp_path / "bin"
    wrap.mkdir()
    real = subprocess.run(["sh", "-c", "command -v gcc-12"], capture_output=True, text=True).stdout.strip()
    assert real, "gcc-12 missing"
    (wrap / "gcc-12").write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then\n'
                                 '  echo "gcc-12 (sizewatch test) 12.99.0"; exit 0\nfi\n'
                                 f'exec {real} "$@"\n')
    (wrap / "gcc-12").chmod(0o755)
    workers = Workers(tmp_path, redis, db, env)
    try:
        workers.start(1, toolchains="gcc-12", PATH=f"{wrap}:{os.environ['PATH']}")
        run = coordinator(["--tree", tree, f"{c['base']}..{c['one']}", "--toolchains", "gcc-12", "--attempts", "1"],
                          db, redis, tmp_path, env)
        rc, out, err = finished(run, tmp_path)
        assert rc == 1, err
        parked = _parked_lines(err)
        assert len(parked) == 2, err + logs(tmp_path)
        assert all("12.99.0" in ln for ln in parked), parked     # the worker's version, said
        assert build_keys(db) == []
        st = status(redis)
        assert len(st["parked"]) == 2 and all("12.99.0" in json.dumps(j) for j in st["parked"]), st["parked"]
    finally:
        workers.stop()


@pytest.mark.kernel
def test_bot_with_a_parked_job_is_an_infrastructure_failure(example_store, redis, tmp_path):
    """The README: with ``bot --queue``, a parked job makes the series an infrastructure failure:
    nothing mailed, tried at the next poll. Every work horse dies on the last patch's jobs; once
    the jobs are unparked and a healthy worker runs, the next poll tests and mails the series."""
    from botlist import bot_config
    from toolchains.example import series_commits
    last = series_commits()[1][-1]
    cfg = bot_config(tmp_path / "bot.toml")
    db, outbox = tmp_path / "store.db", tmp_path / "outbox.mbox"
    make_store(db)
    bot = [*sizewatch_cmd(), "bot", "--series", str(EXAMPLE_MBOX), "--policy", str(cfg), "--outbox", str(outbox),
           "--queue", redis.url, "--attempts", "1", "--db", str(db)]

    def series_state() -> list:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT state FROM bot_series").fetchall()
        finally:
            conn.close()
    workers = Workers(tmp_path, redis, db)
    try:
        workers.start(1, EXAMPLE_TOOLCHAINS, SIZEWATCH_QUEUE_KILL_AT=last[:12])
        p = subprocess.run(bot, capture_output=True, text=True, timeout=900)
        assert p.returncode == 1, p.stderr
        assert "infrastructure failure (nothing mailed, retried next poll)" in p.stderr and "parked" in p.stderr, p.stderr
        assert series_state() == [("infra_failure",)]
        assert not outbox.exists() or outbox.read_text() == ""
        st = subprocess.run([*sizewatch_cmd(), "bot", "status", "--db", str(db)], capture_output=True, text=True,
                            timeout=120)
        assert "infrastructure failures (nothing mailed; tried again each poll): 1" in st.stdout, st.stdout
        # the next poll, the jobs unparked and the worker healthy: tested and mailed
        workers.stop()
        workers.procs.clear()
        u = subprocess.run([*sizewatch_cmd(), "queue", "unpark", "--all", "--redis", redis.url], capture_output=True,
                           text=True, timeout=60)
        assert u.returncode == 0, u.stderr
        workers.start(1, EXAMPLE_TOOLCHAINS)
        p = subprocess.run(bot, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr
        assert series_state() == [("tested",)]
        assert "Subject: " in outbox.read_text()
    finally:
        workers.stop()


STORE_LOCAL = {"id", "build_id", "base_build_id", "series_id", "seconds", "created_at"}   # ids, times of the run


def test_postgresql_stopped_and_restarted_mid_run_resumes_to_the_sqlite_report(fake, redis, tmp_path):
    """Issue 28: ``pg_ctl stop -m immediate`` at a seeded random instant of a queued ``sizewatch run`` into
    PostgreSQL (the coordinator planning, polling or comparing; the worker building or writing), started
    again a moment later; the same command run again. ``sizewatch report --json`` of the series then
    equals the in-process run's on sqlite, the store holds one build per key, and neither run, worker nor
    coordinator, ended in a traceback (a run that met the outage says so in one line)."""
    import random
    from buildtrees import git
    from pgserver import PgServer
    tree, c, env, _ = fake
    mbox = tmp_path / "series.mbox"
    mbox.write_text(git(tree, "format-patch", "--stdout", "--thread", f"--base={c['base']}", f"{c['base']}..{c['two']}"))
    args = ["--tree", tree, "--series", mbox, "--toolchains", FAKE_TCS]
    ref_db = tmp_path / "ref.db"
    t0 = time.monotonic()
    ref = subprocess.run([*sizewatch_cmd(), "run", *map(str, args), "--db", str(ref_db)], capture_output=True, text=True,
                         env={**os.environ, **env, "SIZEWATCH_CACHE": str(tmp_path / "cache2")}, timeout=300)
    span = time.monotonic() - t0
    assert ref.returncode == 0, ref.stderr
    msgid = next(ln.split(":", 1)[1].strip() for ln in mbox.read_text().splitlines() if ln.lower().startswith("message-id:"))

    def report(db) -> str:
        """The series' report as JSON, without what differs between any two stores: row ids and build times."""
        p = subprocess.run([*sizewatch_cmd(), "report", msgid, "--json", "--db", str(db)], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr

        def strip(v):
            if isinstance(v, dict):
                return {k: strip(x) for k, x in v.items() if k not in STORE_LOCAL}
            return [strip(x) for x in v] if isinstance(v, list) else v
        return json.dumps(strip(json.loads(p.stdout)), indent=1, sort_keys=True) + "\n"
    want = report(ref_db)
    pg = PgServer()
    workers = None
    try:
        url = pg.database()
        make_store(url)
        workers = Workers(tmp_path, redis, url, env)
        workers.start(1)
        rnd = random.Random(28)
        run = coordinator(args, url, redis, tmp_path, env)
        at = rnd.uniform(0.5, span)
        time.sleep(at)
        pg.crash()
        time.sleep(rnd.uniform(0.5, 3.0))
        pg.start()
        rc, out, err = finished(run, tmp_path)
        print(f"crash at {at:.1f} s of a {span:.1f} s run; first run exit {rc}:\n{err[-1500:]}\n{logs(tmp_path)}")
        assert "Traceback" not in err + logs(tmp_path)
        again = coordinator(args, url, redis, tmp_path, env, name="again")
        rc2, out2, err2 = finished(again, tmp_path, "again")
        assert rc2 == 0, err2 + logs(tmp_path)
        same_text(report(url), want)
        import psycopg
        with psycopg.connect(url) as conn:
            n, keys = conn.execute("SELECT count(*), count(DISTINCT (commit_id, toolchain_id, config_id, target)) "
                                   "FROM builds").fetchone()
        assert n == keys == 8
    finally:
        if workers is not None:
            workers.stop()
        pg.stop()

"""arm64 on the queue (issue 30): one queue per toolchain and arch, workers serving the arches they
are started for (``sizewatch worker --arch``), a job for another arch refused in one line. On a real
redis-server (tests/redisserver.py) with the fake kernel (tests/fakekernel: real compilers, the cross
``aarch64-linux-gnu-gcc-12`` for arm64's gcc-12); the queued reports are the in-process ones byte for
byte. The example series' arm64 allocator object goes through a real worker too (``kernel``: the cached
arm64 build dirs make it a replay per commit)."""
from __future__ import annotations

import os
import subprocess
import sqlite3
from pathlib import Path

import pytest

from buildtrees import commit_on, edit, fake_tree
from conftest import EXAMPLE_MBOX, sizewatch_cmd
from test_queue import (FAKE_TCS, Workers, build_keys, coordinator, finished, logs, make_store, redis,  # noqa: F401
                        same_text, status, wait_for)


@pytest.fixture
def fake(tmp_path):
    """A fake kernel tree base → one → two, its own cache and an empty store: (tree, commits, env, store)."""
    tree, base = fake_tree(tmp_path / "linux-fake")
    c = {"base": base}
    c["one"] = commit_on(tree, base, {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1", "* 5 + 2")},
                         "mm: one")
    c["two"] = commit_on(tree, c["one"], {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1", "* 7 + 2")},
                         "mm: two")
    env = {"SIZEWATCH_CACHE": str(tmp_path / "cache")}
    db = tmp_path / "store.db"
    make_store(db)
    return tree, c, env, db


def fake_args(tree: Path, c: dict, arch: str) -> list:
    return ["--tree", tree, f"{c['base']}..{c['two']}", "--toolchains", FAKE_TCS, "--arch", arch]


def in_process(args: list, tmp: Path, name: str) -> str:
    """The same run built in this process, into a store and cache of its own: the report to match."""
    p = subprocess.run([*sizewatch_cmd(), "run", *map(str, args), "--db", str(tmp / f"{name}.db")],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "SIZEWATCH_CACHE": str(tmp / f"cache-{name}")})
    assert p.returncode == 0, p.stderr
    return p.stdout


def report(db: Path, sha: str) -> str:
    """``sizewatch report`` of a commit: every build stored for it, whichever run or worker wrote it."""
    p = subprocess.run([*sizewatch_cmd(), "report", sha, "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def configs(db: Path) -> dict[str, set[str]]:
    """config key -> the toolchain versions stored under it."""
    out: dict[str, set[str]] = {}
    for _, _, version, config, _ in build_keys(db):
        out.setdefault(config, set()).add(version)
    return out


def test_one_worker_serves_x86_64_and_arm64_queues(fake, redis, tmp_path):
    """An x86_64 run and an arm64 run at once through one worker started for both arches: four queues
    (toolchain × arch), each build under its own compiler (arm64's gcc-12 is the cross one), and the
    commits' reports (both arches' builds) those of the same two runs in-process, byte for byte."""
    tree, c, env, db = fake
    workers = Workers(tmp_path, redis, db, env)
    try:
        workers.start(1, store_args=["--db", db, "--arch", "x86_64,arm64"])
        st = status(redis)
        assert [(w["toolchains"], w["arches"]) for w in st["workers"]] == [(["clang-19", "gcc-12"],
                                                                             ["arm64", "x86_64"])]
        x86 = coordinator(fake_args(tree, c, "x86_64"), db, redis, tmp_path, env, name="x86")
        arm = coordinator(fake_args(tree, c, "arm64"), db, redis, tmp_path, env, name="arm")
        rc, _, err = finished(x86, tmp_path, "x86")
        assert rc == 0, err + logs(tmp_path)
        assert "queue: 6 job(s)" in err and "(sizewatch:clang-19, sizewatch:gcc-12)" in err, err
        rc, _, err = finished(arm, tmp_path, "arm")
        assert rc == 0, err + logs(tmp_path)
        assert "queue: 6 job(s)" in err and "(sizewatch:arm64:clang-19, sizewatch:arm64:gcc-12)" in err, err
        in_process(fake_args(tree, c, "x86_64"), tmp_path, "ref")
        in_process(fake_args(tree, c, "arm64"), tmp_path, "ref")
        for sha in (c["one"], c["two"]):
            want = report(tmp_path / "ref.db", sha)
            assert want.count("[defconfig-arm64-") == 2 and want.count("[defconfig-83") == 2, want
            same_text(report(db, sha), want)
        st = status(redis)
        assert sorted((q["name"], q["toolchain"], q["arch"]) for q in st["queues"]) == [
            ("sizewatch:arm64:clang-19", "clang-19", "arm64"), ("sizewatch:arm64:gcc-12", "gcc-12", "arm64"),
            ("sizewatch:clang-19", "clang-19", "x86_64"), ("sizewatch:gcc-12", "gcc-12", "x86_64")]
        assert st["workers"][0]["done"] == 12 and not st["parked"]
        keys = build_keys(db)
        assert len(keys) == len(set(keys)) == 12              # 3 commits x 2 toolchains x 2 arches
        by_config = configs(db)
        arm_key = next(k for k in by_config if "-arm64-" in k)
        assert len(by_config) == 2 and arm_key.startswith("defconfig-arm64-")
        gcc_versions = {v for v in by_config[arm_key] if "gcc" in v}
        cross = subprocess.run(["aarch64-linux-gnu-gcc-12", "--version"], capture_output=True,
                               text=True).stdout.splitlines()[0]
        assert gcc_versions == {cross}
        conn = sqlite3.connect(db)
        try:                                                  # the config rows carry their arch
            assert sorted(conn.execute("SELECT key, arch FROM configs")) == sorted(
                (k, "arm64" if k == arm_key else "x86_64") for k in by_config)
        finally:
            conn.close()
    finally:
        workers.stop()


def test_a_thinlto_arm64_job_carries_its_config_to_the_worker(fake, redis, tmp_path):
    """``run --lto thin --arch arm64 --queue``: the job's config (arch and the ThinLTO fragment) reaches the
    worker whole, so it builds and stores under the key the coordinator waits on; the report is the
    in-process one byte for byte. (The fake kernel's vmlinux is a relocatable ``ld -r``: the analysis
    says so, the same line both ways.)"""
    from toolchains.kbuild import preset
    tree, c, env, db = fake
    args = ["--tree", tree, f"{c['base']}..{c['two']}", "--toolchains", "clang-19", "--targets", "vmlinux",
            "--lto", "thin", "--arch", "arm64"]
    workers = Workers(tmp_path, redis, db, env)
    try:
        workers.start(1, "clang-19", store_args=["--db", db, "--arch", "arm64"])
        rc, out, err = finished(coordinator(args, db, redis, tmp_path, env), tmp_path)
    finally:
        workers.stop()
    ref = subprocess.run([*sizewatch_cmd(), "run", *map(str, args), "--db", str(tmp_path / "ref.db")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SIZEWATCH_CACHE": str(tmp_path / "cache-ref")})
    assert rc == ref.returncode == 0, err + ref.stderr + logs(tmp_path)
    assert "queue: 3 job(s)" in err and "(sizewatch:arm64:clang-19)" in err, err
    same_text(out, ref.stdout.replace(str(tmp_path / "cache-ref"), env["SIZEWATCH_CACHE"]))   # each its cache
    key = preset("defconfig", arch="arm64", lto="thin").key
    assert {k[3] for k in build_keys(db)} == {key} and len(build_keys(db)) == 3
    assert f"vmlinux [{key}]" in out


def test_migration_19_gives_old_arm64_configs_their_arch(tmp_path):
    """Stores written before the pipeline recorded a config's arch hold arm64 configs as x86_64: 0019
    sets them from the key (an arm64 key has ``-arm64-`` after its name), x86_64 ones stay."""
    from db.store import open_store
    from toolchains.kbuild import preset
    db = tmp_path / "old.db"
    open_store(db, upto=18).close()
    keys = [preset("allocator").key, preset("allocator", arch="arm64").key,
            preset("allocator", arch="arm64", lto="thin").key, preset("defconfig").key]
    conn = sqlite3.connect(db)
    conn.executemany("INSERT INTO configs(key) VALUES (?)", [(k,) for k in keys])     # arch: the default
    conn.commit()
    conn.close()
    open_store(db).close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT key, arch FROM configs ORDER BY id").fetchall() == [
            (keys[0], "x86_64"), (keys[1], "arm64"), (keys[2], "arm64"), (keys[3], "x86_64")]
    finally:
        conn.close()


def test_migration_19_drops_the_mixed_matrix_tables(fake, tmp_path):
    """A store a sizewatch before 0019 wrote: an arm64 run's config rows say x86_64 and its commits'
    matrix tables mix the arches. Migrating sets the arch and drops exactly those commits' tables (the
    page ranks them per arch again); a commit with x86_64 builds only keeps its tables."""
    from db.store import open_store
    tree, c, env, db = fake
    for arch, rng in (("x86_64", f"{c['base']}..{c['one']}"), ("arm64", f"{c['one']}..{c['two']}")):
        p = subprocess.run([*sizewatch_cmd(), "run", "--tree", str(tree), rng, "--toolchains", "gcc-12", "--arch", arch,
                            "--db", str(db)], capture_output=True, text=True, timeout=300, env={**os.environ, **env})
        assert p.returncode == 0, p.stderr
    conn = sqlite3.connect(db)                 # as the old sizewatch left it
    conn.execute("UPDATE configs SET arch = 'x86_64'")
    conn.execute("DELETE FROM schema_migrations WHERE version = 19")
    conn.commit()

    def tables() -> dict[str, set[str]]:
        got: dict[str, set[str]] = {}
        for sha, key in conn.execute("SELECT c.sha, m.target FROM matrix_tables m JOIN commits c ON c.id = m.commit_id"):
            got.setdefault(sha, set()).add(key)
        return got
    before = tables()
    assert before[c["base"]] == {"", "mm/page_alloc.o"} and c["one"] in before and c["two"] in before
    open_store(db).close()
    assert tables() == {c["base"]: {"", "mm/page_alloc.o"}}     # one and two have arm64 builds
    assert conn.execute("SELECT count(*) FROM matrix_rows m JOIN commits c ON c.id = m.commit_id "
                        "WHERE c.sha IN (?, ?)", (c["one"], c["two"])).fetchone() == (0,)
    assert sorted(conn.execute("SELECT arch FROM configs")) == [("arm64",), ("x86_64",)]
    conn.close()


def test_bot_with_arm64_hands_its_builds_to_an_arm64_worker(fake, redis, tmp_path):
    """``sizewatch bot --queue`` with ``[bot].arch = "arm64"`` (refused before arches were queued): the
    worker started for arm64 builds the series and the mail is the in-process bot's, reproduce lines
    with ``--arch arm64`` included."""
    from botlist import bot_config
    tree, c, env, db = fake
    mbox = tmp_path / "series.mbox"
    mbox.write_text(subprocess.run(["git", "-C", str(tree), "format-patch", "--stdout", "--thread", "--cover-letter",
                                    "--to=linux-mm@kvack.org", "--base", c["base"], f"{c['base']}..{c['two']}"],
                                   capture_output=True, text=True, check=True).stdout)
    cfg = bot_config(tmp_path / "bot.toml", tree=str(tree), arch="arm64", toolchains=["gcc-12"],
                     report={"growth_bytes": 1})

    def bot(*args, db: Path) -> subprocess.CompletedProcess:
        p = subprocess.run([*sizewatch_cmd(), "bot", "--series", str(mbox), "--policy", str(cfg), "--dry-run",
                            "--db", str(db), *args], capture_output=True, text=True, timeout=600,
                           env={**os.environ, **env})
        assert p.returncode == 0, p.stderr + logs(tmp_path)
        return p

    def body(text: str) -> str:           # the mails without the headers that carry times and ids
        return "\n".join(ln for ln in text.splitlines() if not ln.startswith(("Date:", "Message-ID:", "Message-Id:")))
    workers = Workers(tmp_path, redis, db, env)
    try:
        workers.start(1, "gcc-12", store_args=["--db", db, "--arch", "arm64"])
        queued = bot("--queue", redis.url, db=db)
        assert "queue: 3 job(s)" in queued.stderr and "(sizewatch:arm64:gcc-12)" in queued.stderr, queued.stderr
        assert status(redis)["workers"][0]["done"] == 3
    finally:
        workers.stop()
    local = bot(db=tmp_path / "local.db")
    # patch 1 leaves arm64's object the same size (nothing to mail); patch 2 grows alloc_pages by 4 bytes
    assert [ln for ln in queued.stdout.splitlines() if ln.startswith("Subject:")] == ["Subject: Re: [PATCH 2/2] mm: two"]
    assert body(queued.stdout) == body(local.stdout)
    assert "aarch64-linux-gnu-gcc-12" in queued.stdout and "      --arch arm64" in queued.stdout


def test_a_worker_refuses_a_job_for_another_arch(fake, redis, tmp_path):
    """A job whose arch the worker was not started for (put on its queue by hand, as an older or foreign
    coordinator could) fails with one line saying so, is parked after its attempt and stored nowhere."""
    from rq import Queue

    from ci.pipeline.run import BuildJob
    from ci.queue.names import connect, describe, job_id
    from ci.queue.wire import FUNCTION, SERIALIZER, SafeJob, job_args
    from db.models import Commit
    from db.store import open_store
    from toolchains.build import toolchain_info
    from toolchains.kbuild import preset
    tree, c, env, db = fake
    job = BuildJob("linux-fake", str(tree), Commit(c["one"], c["base"], "mm: one", "t", "2001-01-01", "linux-fake"),
                   "gcc-12", ("mm/page_alloc.o",), preset("defconfig", arch="arm64"))
    version = toolchain_info("gcc-12", "arm64")[1]
    with open_store(db) as st:
        identity = st.identity()
    conn = connect(redis.url)
    q = Queue("sizewatch:gcc-12", connection=conn, job_class=SafeJob, serializer=SERIALIZER)   # x86_64's queue
    jid = job_id(job, version)
    q.enqueue_call(FUNCTION, args=job_args(job, identity, version), job_id=jid, description=describe(job))
    p = subprocess.run([*sizewatch_cmd(), "worker", "--toolchains", "gcc-12", "--redis", redis.url, "--db", str(db),
                        "--burst"], capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert p.returncode == 0, p.stderr
    st = status(redis)
    assert [(j["id"], j["description"], j["error"]) for j in st["parked"]] == [
        (jid, f"gcc-12 arm64 {c['one'][:12]} mm/page_alloc.o",
         "ci.queue.names.QueueError: this worker builds x86_64, the job is for arm64 (start one with --arch arm64)")]
    assert build_keys(db) == []
    assert not list(Path(env["SIZEWATCH_CACHE"]).glob("build/*"))         # refused before any build


def test_bad_arch_input_is_one_line(tmp_path, redis):
    db = tmp_path / "s.db"
    make_store(db)
    for args, want in [
        (["worker", "--toolchains", "gcc-12", "--arch", "mips", "--redis", redis.url, "--db", db],
         "sizewatch: --arch: unknown arch 'mips' (known: x86_64, arm64)"),
        (["worker", "--toolchains", "gcc-11", "--arch", "arm64", "--redis", redis.url, "--db", db], "gcc-11"),
    ]:
        p = subprocess.run([*sizewatch_cmd(), *map(str, args)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and want in p.stderr, (args, p.stderr)
    assert not status(redis)["workers"]


def test_a_job_for_an_unknown_arch_is_refused_unloaded():
    from ci.queue.wire import BadPayload, job_from_dict, job_to_dict
    from ci.pipeline.run import BuildJob
    from db.models import Commit
    from toolchains.kbuild import preset
    job = BuildJob("linux-6.1", "/src/linux", Commit("a" * 40, None, "s", "a", "d", "linux-6.1"), "clang-19",
                   ("vmlinux",), preset("allocator", arch="arm64", lto="thin"))
    d = job_to_dict(job)
    back = job_from_dict(d)
    assert back == job and back.config.arch == "arm64" and back.config.lto == "thin"
    d["config"]["arch"] = "mips"
    with pytest.raises(BadPayload) as e:
        job_from_dict(d)
    assert str(e.value) == "the config's arch 'mips' is none sizewatch builds (x86_64, arm64)"


@pytest.mark.kernel
def test_example_series_arm64_through_a_worker(redis, tmp_path):
    """The example series' arm64 allocator object under the cross gcc-12, built by a real worker: the
    in-process report byte for byte, stored under the arm64 config with the cross compiler's version."""
    db = tmp_path / "store.db"
    make_store(db)
    args = ["--series", EXAMPLE_MBOX, "--toolchains", "gcc-12", "--arch", "arm64", "--config", "allocator",
            "--targets", "mm/page_alloc.o"]
    workers = Workers(tmp_path, redis, db)
    try:
        workers.start(1, "gcc-12", store_args=["--db", db, "--arch", "arm64"])
        p = coordinator(args, db, redis, tmp_path)
        rc, out, err = finished(p, tmp_path, timeout=1800)
        assert rc == 0, err + logs(tmp_path)
        assert "(sizewatch:arm64:gcc-12)" in err
    finally:
        workers.stop()
    ref = subprocess.run([*sizewatch_cmd(), "run", *map(str, args), "--db", str(tmp_path / "ref.db")],
                         capture_output=True, text=True, timeout=1800)
    assert ref.returncode == 0, ref.stderr
    same_text(out, ref.stdout)
    keys = build_keys(db)
    assert len(keys) == len(set(keys)) == 3 and keys == build_keys(tmp_path / "ref.db")
    assert all(k[3].startswith("allocator-arm64-") and k[2].startswith("aarch64-linux-gnu-gcc-12 ") for k in keys)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM builds WHERE status = 'ok'").fetchone() == (3,)
    finally:
        conn.close()

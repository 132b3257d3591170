"""The queue against whoever can write to Redis, and the store's password kept out of Redis, argv
and messages (issue 27, section 2). A real redis-server (tests/redisserver.py), real ``sizewatch
worker`` processes, a real PostgreSQL whose role needs its password (tests/pgserver.py).

- a job naming any function but ``ci.queue.jobs.execute`` (``os.system`` through RQ's own API, with
  its default pickles or with JSON), one whose arguments are not sizewatch's JSON, one carrying a
  callback: refused with one line, parked, never run; the marker files their commands would make
  never appear;
- a hand-made pickle whose ``__reduce__`` runs a command, written straight into ``rq:job:ID`` (data,
  meta and result): never unpickled by the worker nor by ``queue status``;
- ``queue status`` prints a forged description or error as one clean line;
- the worker takes its store from $SIZEWATCH_DB or a 0600 file, never argv (``/proc/PID/cmdline``),
  refuses a password on its command line; jobs name their store by identity: no URL, no password in
  any Redis key; a worker of another store refuses the job in one line.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import time
import zlib
from pathlib import Path

from conftest import sizewatch_cmd
from test_queue import (Workers, build_keys, fake, fake_range, finished, logs, make_store, redis,  # noqa: F401
                        status, wait_for)

PW = "Sekr3tPW"
CONTROL = "\x07\x1b"


class Evil:
    """A pickle that runs ``touch PATH`` when loaded: what a stranger writes into a job."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def parked_by_id(redis) -> dict[str, dict]:
    return {j["id"]: j for j in status(redis)["parked"]}


def redis_dump(redis) -> bytes:
    """Every value of every key in Redis, job data decompressed: what a reader of Redis sees."""
    r = redis.client()
    out = []
    for key in r.scan_iter("*"):
        kind = r.type(key)
        if kind == b"hash":
            vals = list(r.hgetall(key).items())
            vals = [x for kv in vals for x in kv]
        elif kind == b"list":
            vals = r.lrange(key, 0, -1)
        elif kind == b"set":
            vals = list(r.smembers(key))
        elif kind == b"zset":
            vals = r.zrange(key, 0, -1)
        elif kind == b"stream":
            vals = [x for _, fields in r.xrange(key) for kv in fields.items() for x in kv]
        else:
            vals = [r.get(key) or b""]
        for v in [key, *vals]:
            try:
                v = zlib.decompress(v)
            except zlib.error:
                pass
            out.append(v)
    return b"\n".join(out)


# --- strangers' jobs -------------------------------------------------------------------------------

def test_a_job_naming_any_other_function_is_refused_and_never_run(redis, tmp_path):
    from rq import Callback, Queue, Retry
    from rq.serializers import JSONSerializer
    from ci.pipeline.run import BuildJob
    from ci.queue.wire import FUNCTION, job_to_dict
    from db.models import Commit
    from toolchains.build import toolchain_info
    db = tmp_path / "store.db"
    make_store(db)
    marks = {name: tmp_path / f"{name}.mark" for name in ("pickled", "json", "retried")}
    conn = redis.client()
    plain, as_json = Queue("sizewatch:gcc-12", connection=conn), Queue("sizewatch:gcc-12", connection=conn,
                                                                       serializer=JSONSerializer)
    plain.enqueue_call("os.system", args=(f"touch {marks['pickled']}",), job_id="evil-pickled")
    as_json.enqueue_call("os.system", args=[f"touch {marks['json']}"], job_id="evil-json")
    as_json.enqueue_call("os.system", args=[f"touch {marks['retried']}"], job_id="evil-retry", retry=Retry(max=3))
    as_json.enqueue_call(FUNCTION, args=[{"tree": "linux"}, "store-1", "12"], job_id="evil-shape")
    real = job_to_dict(BuildJob("linux-fake", str(tmp_path), Commit("a" * 40, None, "x", "", "", "linux-fake"),
                                toolchain_info("gcc-12"), ("mm/page_alloc.o",)))
    as_json.enqueue_call(FUNCTION, args=[real, "store-1", "12"], job_id="evil-callback",
                         on_failure=Callback("os.system"), on_success=Callback("os.system"))
    workers = Workers(tmp_path, redis, db)
    try:
        workers.start(1, "gcc-12")
        parked = wait_for(lambda: (p := parked_by_id(redis)) and len(p) == 5 and p, timeout=60, what="5 jobs parked")
        time.sleep(1.5)                                 # a retried job would be back on the queue by now
        for m in marks.values():
            assert not m.exists(), m
        want = {"evil-pickled": "its data is not JSON (a pickle is never loaded)",
                "evil-json": "it names the function 'os.system'; this worker runs ci.queue.jobs.execute only",
                "evil-retry": "it names the function 'os.system'",
                "evil-shape": "the job has other fields than expected",
                "evil-callback": "it carries callbacks or webhooks"}
        for jid, words in want.items():
            assert f"refused job {jid}: {words}" in parked[jid]["error"], (jid, parked[jid])
        st = status(redis)
        assert not st["running"] and sum(q["queued"] for q in st["queues"]) == 0
        assert [w["failed"] for w in st["workers"]] == [5]          # each refused once: no retries
        assert all(p.poll() is None for p in workers.procs), logs(tmp_path)
        assert build_keys(db) == []
    finally:
        workers.stop()


def test_a_hand_made_pickle_in_the_job_hash_is_never_loaded(redis, tmp_path):
    db = tmp_path / "store.db"
    make_store(db)
    control = tmp_path / "control.mark"
    pickle.loads(pickle.dumps(Evil(control)))          # the payload is live: loading it runs the command
    assert control.exists()
    marks = {f: tmp_path / f"{f}.mark" for f in ("data", "meta", "result")}
    conn = redis.client()
    when = "2025-01-01T00:00:00.000000Z"
    conn.hset("rq:job:evil-hash", mapping={
        "data": zlib.compress(pickle.dumps((Evil(marks["data"]), None, (), {}))),
        "meta": pickle.dumps(Evil(marks["meta"])), "result": pickle.dumps(Evil(marks["result"])),
        "status": "queued", "origin": "sizewatch:gcc-12", "description": "gcc-12 evil", "created_at": when,
        "enqueued_at": when, "timeout": "60"})
    conn.sadd("rq:queues", "rq:queue:sizewatch:gcc-12")
    conn.rpush("rq:queue:sizewatch:gcc-12", "evil-hash")
    workers = Workers(tmp_path, redis, db)
    try:
        workers.start(1, "gcc-12")
        parked = wait_for(lambda: parked_by_id(redis).get("evil-hash"), timeout=60, what="the job parked")
        assert "refused job evil-hash: its data is not JSON" in parked["error"], parked
        text = subprocess.run([*sizewatch_cmd(), "queue", "status", "--redis", redis.url], capture_output=True,
                              text=True, timeout=60)
        assert text.returncode == 0 and "gcc-12 evil: " in text.stdout, text.stderr
        for m in marks.values():
            assert not m.exists(), m
        assert all(p.poll() is None for p in workers.procs), logs(tmp_path)
    finally:
        workers.stop()


def test_queue_status_prints_forged_text_as_one_clean_line(redis, tmp_path):
    """A description and an error written by a stranger, with newlines, BEL and escape sequences that
    would print status lines of their own: one line each, no control character reaches the terminal."""
    from rq import Queue
    from rq.registry import FailedJobRegistry
    from rq.results import Result
    from ci.queue.wire import SERIALIZER
    q = Queue("sizewatch:gcc-12", connection=redis.client(), serializer=SERIALIZER)
    forged = "gcc-12 abc\n\nrunning:\n  gcc-12 FORGED on host since now\x07\x1b[2J\r"
    job = q.enqueue_call("x.y", description=forged, job_id="forged")
    q.remove(job)
    FailedJobRegistry(queue=q).add(job, ttl=600)
    conn = redis.client()                 # forged workers: one RQ cannot parse, one with escapes in its name
    for name, fields in (("rq:worker:bad-date", {"last_heartbeat": "garbage", "birth": "x"}),
                         ("rq:worker:w\x07\nFORGED-W", {"state": "busy\x1b[2J\nFORGED-S", "current_job": "j\x07"})):
        conn.sadd("rq:workers", name)
        conn.sadd("rq:workers:sizewatch:gcc-12", name)
        conn.hset(name, mapping={"queues": "sizewatch:gcc-12", "state": "idle", **fields})
    Result.create_failure(job, 600, "Traceback\nboom\x07\x1b]0;owned\x07 now\n", worker_name="w\x1b[1m\nx")
    p = subprocess.run([*sizewatch_cmd(), "queue", "status", "--redis", redis.url], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert not any(c in p.stdout for c in CONTROL + "\r"), repr(p.stdout)
    line = [ln for ln in p.stdout.splitlines() if "FORGED on host" in ln]
    assert line == ["  gcc-12 abc running: gcc-12 FORGED on host since now [2J: boom ]0;owned now  "
                    "(forged, last worker ?)"], p.stdout
    assert "running:\n  none" in p.stdout                     # the forged "running:" made no section
    assert "workers:\n  w FORGED-W  [gcc-12] x86_64  busy [2J FORGED-S  done 0, failed 0\n\n" in p.stdout, p.stdout
    st = status(redis)
    assert st["parked"][0]["description"] == "gcc-12 abc running: gcc-12 FORGED on host since now [2J"


# --- the store's password: env or a private file, never argv, never in Redis ----------------------

def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def refused(args: list, env: dict | None = None, code: int = 1) -> str:
    p = subprocess.run([*sizewatch_cmd(), *map(str, args)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **(env or {})})
    assert p.returncode == code and "Traceback" not in p.stderr, (args, p.returncode, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and PW not in p.stderr, (args, p.stderr)
    return p.stderr


def test_worker_takes_its_store_from_env_or_a_private_file_never_argv(pg_server, redis, tmp_path):
    url = pg_server.password_database("swworker", PW)        # the role must give its password
    with_pw = url.replace("swworker@", f"swworker:{PW}@")
    make_store(with_pw)
    private = tmp_path / "store-url"
    private.write_text(f"{url}?password={PW}\n")
    private.chmod(0o600)
    workers = Workers(tmp_path, redis, tmp_path / "unused")
    try:
        by_env, = workers.start(1, "gcc-12", store_args=[], SIZEWATCH_DB=with_pw)
        by_file, = workers.start(1, "gcc-12", store_args=["--db-file", private])
        for p in (by_env, by_file):
            assert PW not in cmdline(p.pid) and "postgresql://" not in cmdline(p.pid), cmdline(p.pid)
        assert str(private) in cmdline(by_file.pid)
        wait_for(lambda: "listening on" in workers.log(1), what="the second worker's banner")
        for i in (0, 1):
            log = workers.log(i)
            assert f"writing to {url} (store-" in log or f"writing to {url}?password=*** (store-" in log, log
            assert PW not in log
    finally:
        workers.stop()
    env_no_db = {"SIZEWATCH_DB": ""}
    worker = ["worker", "--toolchains", "gcc-12", "--redis", redis.url]
    for store in (with_pw, f"{url}?password={PW}", f"{url}?sslmode=disable&%70assword={PW}"):
        err = refused([*worker, "--db", store], env_no_db)
        assert "a password on the command line shows in ps" in err and "$SIZEWATCH_DB" in err and "--db-file" in err
    for mode in (0o644, 0o640, 0o604, 0o660):
        private.chmod(mode)
        err = refused([*worker, "--db-file", private], env_no_db)
        assert f"mode {mode:04o}, readable by others; chmod 600 {private}" in err, err
    private.chmod(0o600)
    assert "give the store" in refused(worker, env_no_db)
    assert "cannot read the store file" in refused([*worker, "--db-file", tmp_path / "missing"], env_no_db)
    # a Redis password on the command line too (exit 2: a bad command line)
    err = refused(["worker", "--toolchains", "gcc-12", "--redis", f"redis://:{PW}@127.0.0.1:1/0"], env_no_db, code=2)
    assert "a password on the command line shows in ps" in err and "$SIZEWATCH_REDIS" in err
    # a wrong password, from the environment: the server's one line, neither password in it
    err = refused(worker, {"SIZEWATCH_DB": f"{url}?password=wrong{PW}"})
    assert "password authentication failed" in err and "wrong" not in err


def test_jobs_name_their_store_by_identity_and_a_worker_of_another_refuses(fake, pg_server, redis, tmp_path):
    tree, c, env, sqlite_db = fake
    url = pg_server.password_database("swqueue", PW)
    with_pw = url.replace("swqueue@", f"swqueue:{PW}@")
    make_store(with_pw)
    from db.store import open_store
    with open_store(with_pw) as st:
        identity = st.identity()
    workers = Workers(tmp_path, redis, sqlite_db, env)
    try:
        workers.start(1, store_args=[], SIZEWATCH_DB=with_pw)
        run = subprocess.Popen([*sizewatch_cmd(), "run", *map(str, fake_range(tree, c, "one")), "--queue", redis.url],
                               stdout=open(tmp_path / "run.out", "w"), stderr=open(tmp_path / "run.err", "w"),
                               env={**os.environ, **env, "SIZEWATCH_DB": with_pw}, start_new_session=True)
        rc, out, err = finished(run, tmp_path)
        assert rc == 0, err + logs(tmp_path)
        assert "4 built" in err and PW not in err + out
        dump = redis_dump(redis)
        assert identity.encode() in dump                     # the jobs name their store ...
        assert PW.encode() not in dump and b"postgresql://" not in dump and b"swqueue" not in dump   # ... by it alone
        # a coordinator on another store (the fake's sqlite file): that worker refuses, one line, parked
        run = subprocess.Popen([*sizewatch_cmd(), "run", *map(str, fake_range(tree, c, "one")), "--queue", redis.url,
                                "--db", sqlite_db, "--attempts", "1"],
                               stdout=open(tmp_path / "other.out", "w"), stderr=open(tmp_path / "other.err", "w"),
                               env={**os.environ, **env}, start_new_session=True)
        rc, out, err = finished(run, tmp_path, "other")
        assert rc == 1
        with open_store(sqlite_db) as st:
            other = st.identity()
        lines = [ln for ln in err.splitlines() if "parked after 1 attempt(s)" in ln]
        assert len(lines) == 4 and all(f"this worker writes to {url} ({identity}), the job's coordinator reads {other}"
                                       in ln for ln in lines), err
        assert PW not in err and build_keys(sqlite_db) == []
    finally:
        workers.stop()


def test_compose_gives_the_worker_its_store_in_the_environment():
    import yaml
    doc = yaml.safe_load((Path(__file__).resolve().parent.parent / "compose.yaml").read_text())
    for name in ("worker", "web", "bot"):
        svc = doc["services"][name]
        assert "--db" not in svc["command"] and "--db-file" not in svc["command"]
        assert svc["environment"]["SIZEWATCH_DB"].startswith("postgresql://")
        assert not any("@" in a or "password" in a for a in svc["command"]), svc["command"]

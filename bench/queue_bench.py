"""The build queue (ci.queue), timed beside the in-process pipeline it distributes.

1. Real builds: a range of N commits on linux-6.1 (each adds a function to mm/page_alloc.c, so
   every commit compiles: kbuild's command replayed) × T toolchains, ``mm/page_alloc.o``, run three
   ways from the same starting state (a private cache with the prepared build dirs copied and no
   object kept, an empty store): ``sizewatch run`` in-process (the anchor), then ``--queue`` with 1
   and with 2 ``sizewatch worker`` processes holding every toolchain, and 2 holding half of them
   each ("split": on one host workers share the per-toolchain build dirs, so two workers on one
   toolchain take turns at its lock, as in-process builds of one toolchain do), and 2 holding half of
   them each that share no disk with the coordinator nor with each other ("no shared disk": each in a
   mount namespace of its own with empty tmpfs over the coordinator's cache, ~/.cache and the other's
   directory; its own Debian tree, unpacked before timing, the commits fetched from the store's git
   bundles while timed (the range's first commit already in the warm-up); its worktrees checked out
   in a warm-up, then its build dirs copied in as the others' are). Printed: wall times, speed-up over in-process, and
   the queue's overhead per job (with one worker the jobs run one after another: the run's wall
   time minus the jobs' own execution times (RQ's started/ended stamps), per job).
2. Simulation: W worker processes (the real worker class and coordinator, ``ci.queue``) run
   synthetic jobs: each sleeps for a build's measured duration (part 1's per-job times, divided by
   a time-compression factor) and writes a real build record (symbols, functions, remarks and
   findings of a real gcc-12 page_alloc.o) into the store, one transaction, as a worker does.
   Series-shaped runs (a base and 3 patches × 8 toolchains = 32 jobs) go through C coordinators at
   once. Printed: jobs/s, the coordinators' and store's overhead per job, the store's write p50/p95,
   and the headroom over a list's peak (200 series/day × 8 toolchains × (3 patches + base)).

    .venv/bin/python bench/queue_bench.py [--commits 20] [--toolchains gcc-11,gcc-12,clang-14,clang-19]
                                          [--modes in-process,1,2,split,noshare] [--skip-real] [--sim-workers 64] [--sim-series 60] [--compress 100]
"""
from __future__ import annotations

import argparse
import os
import pickle
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

SW = str(ROOT / ".venv/bin/sizewatch") if (ROOT / ".venv/bin/sizewatch").exists() else \
    shutil.which("sizewatch", path=str(Path(sys.executable).parent)) or "sizewatch"     # a worktree: its venv's
TARGET = "mm/page_alloc.o"


def load() -> str:
    return "load " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


# --- part 1: real builds ------------------------------------------------------------------------

def make_range(n: int) -> tuple[Path, str, list[str]]:
    """N commits on the example series' base, each adding one function to mm/page_alloc.c (same shas
    every run: git plumbing with pinned dates)."""
    from buildtrees import commit_on, git
    from toolchains.example import series_commits
    tree, shas = series_commits()
    base = shas[0]
    text = git(tree, "show", f"{base}:mm/page_alloc.c") + "\n"
    out, head = [], base
    for i in range(n):
        text += f"\nint sizewatch_queue_bench_{i}(int x);\nint sizewatch_queue_bench_{i}(int x)\n{{\n\treturn x * {i + 3} + {i};\n}}\n"
        head = commit_on(tree, head, {"mm/page_alloc.c": text}, f"mm: queue bench {i}")
        out.append(head)
    return tree, base, out


def private_cache(toolchains: list[str]) -> Path:
    """A cache of its own, kept between runs of this bench (<cache>/bench/queue-cache): the shared
    source tree linked, its own worktrees (checked out once: no other process uses them while this
    bench builds), the prepared build dirs copied in by ``reset``."""
    from toolchains.source import cache_dir, ensure_source
    src = ensure_source("6.1")
    path = cache_dir() / "bench" / "queue-cache"
    path.mkdir(parents=True, exist_ok=True)
    if not (path / src.path.name).exists():
        (path / src.path.name).symlink_to(src.path)
    return path


def reset(cache: Path, toolchains: list[str]) -> None:
    """Nothing built: no kept objects, the build dirs as the shared cache has them minus the target."""
    from toolchains.kbuild import Config
    from toolchains.source import cache_dir
    shutil.rmtree(cache / "objects", ignore_errors=True)
    (cache / "build").mkdir(exist_ok=True)
    for tc in toolchains:
        name = f"{tc}-{Config().key}"
        dst = cache / "build" / name
        shutil.rmtree(dst, ignore_errors=True)
        src = cache_dir() / "build" / name
        if src.exists():
            subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
            (dst / TARGET).unlink(missing_ok=True)


def start_workers(n: int, toolchains: list[str], redis_url: str, db: Path, env: dict, logdir: Path,
                  split: bool = False) -> list:
    """N workers holding every toolchain, or with ``split`` the toolchains dealt out between them (on
    one host they share the build dirs: two workers on one toolchain wait for each other's lock)."""
    procs = []
    for i in range(n):
        log = open(logdir / f"worker{i}.log", "w")
        mine = toolchains[i::n] if split else toolchains
        procs.append(subprocess.Popen([SW, "worker", "--toolchains", ",".join(mine), "--redis", redis_url,
                                       "--db", str(db)], stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True))
        log.close()
    from redis import Redis
    from rq.worker import Worker
    conn = Redis.from_url(redis_url)
    deadline = time.monotonic() + 120
    while len(Worker.all(connection=conn)) < n:
        if time.monotonic() > deadline:
            sys.exit("bench: workers did not register")
        time.sleep(0.1)
    return procs


def noshare_caches(toolchains: list[str], workdir: Path) -> dict[str, Path]:
    """Two worker directories (cache, home) of their own, each given half the toolchains: its own Debian
    tree (``ensure_source``, unpacked here side by side, untimed)."""
    dirs = {f"noshare-{i}": workdir / f"noshare-{i}" for i in range(2)}
    procs = []
    for d in dirs.values():
        (d / "home").mkdir(parents=True, exist_ok=True)
        procs.append(subprocess.Popen([sys.executable, "-c", "from toolchains.source import ensure_source; "
                                       "ensure_source('6.1')"], env={**os.environ, "SIZEWATCH_CACHE": str(d / "cache")}))
    if any(p.wait() for p in procs):
        sys.exit("bench: a worker's own Debian tree could not be made")
    return dirs


def start_noshare_workers(toolchains: list[str], redis_url: str, db: Path, env: dict, logdir: Path,
                          dirs: dict[str, Path], coord_cache: Path) -> list:
    """One worker per directory of ``noshare_caches``, holding its half of the toolchains, that sees
    none of the coordinator's cache, ~/.cache (the shared cache) nor the other worker's directory."""
    from isolation import isolated
    from toolchains.source import cache_dir
    procs = []
    for i, d in enumerate(dirs.values()):
        hide = [coord_cache, cache_dir(), Path.home() / ".cache", *(o for o in dirs.values() if o != d)]
        log = open(logdir / f"noshare-worker{i}.log", "w")
        cmd = [SW, "worker", "--toolchains", ",".join(toolchains[i::2]), "--redis", redis_url, "--db", str(db)]
        procs.append(subprocess.Popen(isolated(cmd, hide), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                      env={**env, "SIZEWATCH_CACHE": str(d / "cache"), "HOME": str(d / "home")}))
        log.close()
    from redis import Redis
    from rq.worker import Worker
    conn = Redis.from_url(redis_url)
    deadline = time.monotonic() + 120
    while len(Worker.all(connection=conn)) < len(procs):
        if time.monotonic() > deadline:
            sys.exit("bench: workers did not register")
        time.sleep(0.1)
    return procs


def reset_noshare(dirs: dict[str, Path], toolchains: list[str]) -> None:
    """The workers' own caches in the state every other run starts from (``reset``): no kept objects,
    the build dirs copied again from the shared cache; their worktrees stay checked out."""
    for i, d in enumerate(dirs.values()):
        reset(d / "cache", toolchains[i::2])


def stop_workers(procs: list) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def job_times(redis_url: str) -> list[float]:
    """Execution time (RQ's started_at → ended_at) of every finished sizewatch job."""
    from redis import Redis
    from rq import Queue
    from rq.job import Job
    from rq.registry import FinishedJobRegistry
    conn = Redis.from_url(redis_url)
    out = []
    for q in Queue.all(connection=conn):
        for jid in FinishedJobRegistry(queue=q).get_job_ids():
            j = Job.fetch(jid, connection=conn)
            if j.started_at and j.ended_at:
                out.append((j.ended_at - j.started_at).total_seconds())
    return out


MODES = {"in-process": ("in-process", 0, False), "1": ("queue, 1 worker", 1, False),
         "2": ("queue, 2 workers", 2, False), "split": ("queue, 2 split", 2, True),
         "noshare": ("queue, 2 split, no shared disk", 2, True)}


def bench_real(commits: int, toolchains: list[str], workdir: Path,
               names: tuple[str, ...] = ("in-process", "1", "2", "split", "noshare")) -> list[float]:
    from redisserver import RedisServer
    tree, base, shas = make_range(commits)
    spec = f"{base}..{shas[-1]}"
    cache = private_cache(toolchains)
    env = {**os.environ, "SIZEWATCH_CACHE": str(cache)}
    jobs = (commits + 1) * len(toolchains)
    print(f"1. real builds: {commits} commits (+ their base) x {len(toolchains)} toolchains = {jobs} jobs, {TARGET}; "
          f"private cache {cache}")
    try:
        # warm-up: the private cache's worktrees and build dirs exist before anything is timed
        reset(cache, toolchains)
        warm = subprocess.run([SW, "run", f"{base}..{shas[0]}", "--toolchains", ",".join(toolchains), "--targets", TARGET,
                               "--db", str(workdir / "warm.db")], capture_output=True, text=True, env=env)
        if warm.returncode not in (0, 1):
            sys.exit(f"bench: warm-up failed: {warm.stderr[-500:]}")
        results: dict[str, tuple[float, str]] = {}
        exec_times: list[float] = []
        modes = [MODES[m] for m in names if MODES[m][2] is False or len(toolchains) > 1]
        for mode, n, split in modes:
            reset(cache, toolchains)
            noshare = mode.endswith("no shared disk")
            tag = f"{n}{'s' if split else ''}{'n' if noshare else ''}"
            db = workdir / f"store-{tag}.db"
            from db.store import open_store
            open_store(db).close()
            redis = RedisServer(workdir / f"redis-{tag}") if n else None
            procs: list = []
            try:
                if noshare:
                    dirs = noshare_caches(toolchains, workdir)
                    reset_noshare(dirs, toolchains)
                    procs = start_noshare_workers(toolchains, redis.url, db, env, workdir, dirs, cache)
                    # warm-up as the private cache had: each worker's worktree checked out, its build dir used
                    warm = subprocess.run([SW, "run", f"{base}..{shas[0]}", "--toolchains", ",".join(toolchains),
                                           "--targets", TARGET, "--db", str(db), "--queue", redis.url],
                                          capture_output=True, text=True, env=env)
                    if warm.returncode not in (0, 1):
                        sys.exit(f"bench: the no-shared-disk warm-up failed: {warm.stderr[-800:]}")
                    stop_workers(procs)
                    reset_noshare(dirs, toolchains)
                    db = workdir / f"store-{tag}-timed.db"
                    open_store(db).close()
                    procs = start_noshare_workers(toolchains, redis.url, db, env, workdir, dirs, cache)
                else:
                    procs = start_workers(n, toolchains, redis.url, db, env, workdir, split) if redis else []
                before = load()
                t0 = time.perf_counter()
                args = [SW, "run", spec, "--toolchains", ",".join(toolchains), "--targets", TARGET, "--db", str(db)]
                if redis:
                    args += ["--queue", redis.url]
                p = subprocess.run(args, capture_output=True, text=True, env=env)
                wall = time.perf_counter() - t0
                if p.returncode:
                    sys.exit(f"bench: {mode} failed: {p.stderr[-800:]}")
                results[mode] = (wall, f"{before} -> {load()}")
                built = p.stderr.strip().splitlines()[-1]
                print(f"   {mode:18} {wall:7.1f} s   ({built.split(';')[0].removeprefix('sizewatch: ')}; {results[mode][1]})")
                results[mode + " report"] = (0.0, p.stdout)
                if n == 1:
                    exec_times = job_times(redis.url)
            finally:
                stop_workers(procs)
                if redis:
                    redis.stop()
        same = len({results[m + " report"][1] for m, _, _ in modes}) == 1
        if "in-process" in results:
            base_wall = results["in-process"][0]
            for mode, _, _ in modes[1:]:
                print(f"   speed-up, {mode}: {base_wall / results[mode][0]:.2f}x over in-process")
        if exec_times:
            over = (results["queue, 1 worker"][0] - sum(exec_times)) / len(exec_times)
            print(f"   queue overhead per job (1 worker: wall - sum of {len(exec_times)} job executions, per job): "
                  f"{over * 1000:.0f} ms; job execution median {statistics.median(exec_times):.2f} s")
        print(f"   reports identical in the {len(modes)} runs: {same}")
        return exec_times
    finally:
        shutil.rmtree(cache / "objects", ignore_errors=True)        # the worktrees stay for the next run
        for d in workdir.glob("noshare-*"):
            shutil.rmtree(d, ignore_errors=True)                     # two kernel trees of their own: gigabytes


# --- part 2: simulation ------------------------------------------------------------------------

TEMPLATE = os.environ.get("SIZEWATCH_QUEUE_BENCH_TEMPLATE", "")
WRITES_KEY = "sizewatch-bench:writes"


def sim_toolchain(name: str, arch: str = "x86_64"):
    """A simulated toolchain (no compiler runs): what the synthetic jobs carry, resolved as a worker would."""
    from toolchains.build import ResolvedToolchain
    from toolchains.registry import Toolchain
    return ResolvedToolchain(Toolchain(name, "gcc", (), {}, "true", ("true",), arch=arch), "1.0")


def synthetic_execute(job: dict, store: str, version: str) -> float:
    """The simulation's job: sleep for the build's (compressed) duration, then write a real build's
    rows for this key as a worker does (one transaction, a duplicate keeps the first). Returns the
    store write's seconds. ``job`` is the JSON a queued job carries (ci.queue.wire), ``store`` the
    store's identity; the worker's own store is written."""
    from dataclasses import replace
    from db.models import BuildRecord, ConfigInfo
    from ci.queue.jobs import WorkerSettings, open_existing
    from ci.queue.wire import job_from_dict
    job = job_from_dict(job, resolve=sim_toolchain)
    with open(TEMPLATE, "rb") as f:
        tmpl = pickle.load(f)
    time.sleep(float(job.mcpu.split("@", 1)[1]))           # the duration travels in the job
    rec = BuildRecord(job.tree, job.commit, job.toolchain, version,
                      ConfigInfo(job.config_key, config_hash="sim", config_text=None), job.targets[0], "ok",
                      "gcc", "replay", 1.0, log="", errors=[], objects=[replace(o) for o in tmpl["objects"]],
                      findings=list(tmpl["findings"]), analysis_version=tmpl["analysis_version"],
                      tree_path=job.tree_path)
    t0 = time.perf_counter()
    with open_existing(WorkerSettings.store) as st:
        st.record_build(rec, replace=False)
    took = time.perf_counter() - t0
    from redis import Redis
    Redis.from_url(os.environ["SIZEWATCH_QUEUE_BENCH_REDIS"]).rpush(WRITES_KEY, took)
    return took


def make_template(path: Path) -> None:
    """A real gcc-12 page_alloc.o analyzed as the pipeline does, pickled for the synthetic jobs."""
    from ci.pipeline import analysis
    from ci.pipeline.objects import object_record
    from toolchains.example import build_series
    obj = build_series("gcc-12")[1]
    rec = object_record(obj.object_path, TARGET)
    res = analysis.analyze(obj.object_path, None, [obj.report_path] if obj.report_path else [])
    rec.functions, rec.remarks, rec.facts, rec.likely_paths = res.functions, res.remarks, res.facts, res.likely_paths
    with open(path, "wb") as f:
        pickle.dump({"objects": [rec], "findings": res.findings, "analysis_version": analysis.ANALYSIS_VERSION}, f)


def bench_sim(workers: int, series: int, coordinators: int, compress: float, durations: list[float],
              workdir: Path) -> None:
    from ci.pipeline.run import BuildJob, RunStats
    from ci.queue.coordinator import QueuedBuilds, Run
    from db.models import Commit
    from db.store import open_store
    from redisserver import RedisServer
    toolchains = [sim_toolchain(f"sim-{i}") for i in range(8)]
    tmpl = workdir / "template.pickle"
    make_template(tmpl)
    db = workdir / "sim.db"
    with open_store(db) as st:
        st.ensure_tree("sim-linux")
    redis = RedisServer(workdir / "redis-sim")
    env = {**os.environ, "SIZEWATCH_QUEUE_BENCH_TEMPLATE": str(tmpl), "SIZEWATCH_QUEUE_BENCH_REDIS": redis.url,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    print(f"2. simulation: {workers} workers, {series} series x 4 commits x 8 toolchains = {series * 32} jobs through "
          f"{coordinators} coordinators at once; job durations: part 1's {len(durations)} measured times / {compress:g}")
    rng = random.Random(16)
    procs = []
    try:
        t_start = time.perf_counter()
        procs = start_sim_workers(workers, [tc.name for tc in toolchains], redis.url, db, env, workdir)
        print(f"   {workers} workers up in {time.perf_counter() - t_start:.1f} s ({load()})")
        cfg = QueuedBuilds(redis.url, attempts=3, poll=0.2, function="queue_bench.synthetic_execute")
        todo = list(range(series))
        lock = threading.Lock()
        per_job: list[float] = []
        parked: list[str] = []
        sleep_total = [0.0]
        cpu = [0.0]

        def coordinator() -> None:
            store = open_store(db)
            while True:
                with lock:
                    if not todo:
                        break
                    s = todo.pop(0)
                commits = []
                parent = None
                for p in range(4):
                    sha = f"{s:08x}{p:02x}".ljust(40, "0")
                    commits.append(Commit(sha, parent, f"sim series {s} patch {p}", "sim", "2026-11-26", "sim-linux",
                                          generation=p))
                    parent = sha
                store.record_commits("sim-linux", commits)
                jobs = []
                for c in commits:
                    for tc in toolchains:
                        d = rng.choice(durations) / compress
                        with lock:
                            sleep_total[0] += d
                        # the job's duration travels in its CPU-model field (part of its id, unused here)
                        jobs.append(BuildJob("sim-linux", "/nonexistent", c, tc, (TARGET,), mcpu=f"sim@{d:.4f}"))
                t0, c0 = time.perf_counter(), time.thread_time()
                stats = RunStats()
                Run(cfg, store, jobs, stats, lambda s: None).wait()
                with lock:
                    parked.extend(stats.parked)
                    per_job.append((time.perf_counter() - t0) / len(jobs))
                    cpu[0] += time.thread_time() - c0
            store.close()

        before = load()
        t0 = time.perf_counter()
        threads = [threading.Thread(target=coordinator) for _ in range(coordinators)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        after = load()
        writes = sim_write_times(redis.url)
        n = series * 32
        if parked:
            sys.exit(f"bench: {len(parked)} simulated jobs parked (see the workers' logs): {parked[0]}")
        with open_store(db) as st:
            stored = st.connection().execute("SELECT count(*) FROM builds").fetchone()[0]
        if stored != n:
            sys.exit(f"bench: {stored} builds stored for {n} jobs")
        ideal = sleep_total[0] / workers
        print(f"   {n} jobs in {wall:.1f} s: {n / wall:.1f} jobs/s ({before} -> {after})")
        print(f"   the jobs' own (compressed) durations: {sleep_total[0]:.1f} s in all, {ideal:.1f} s spread over "
              f"{workers} workers: queue + store + coordinator overhead {(wall - ideal) / n * 1000:.0f} ms per job "
              f"(wall-clock, {coordinators} coordinators in parallel)")
        print(f"   coordinators' CPU: {cpu[0] / n * 1000:.1f} ms per job (polling the store and Redis)")
        if writes:
            writes.sort()
            print(f"   store writes (one build: {sum(len(o.symbols) for o in pickle.load(open(tmpl, 'rb'))['objects'])} "
                  f"symbols + functions, remarks, findings): p50 {writes[len(writes) // 2] * 1000:.0f} ms, "
                  f"p95 {writes[int(len(writes) * 0.95)] * 1000:.0f} ms, max {writes[-1] * 1000:.0f} ms "
                  f"({len(writes)} writes, {workers} writers on one sqlite file)")
        need = 200 * 8 * (3 + 1) / 86400
        print(f"   a list's peak: 200 series/day x 8 toolchains x (3 patches + base) = {200 * 32} jobs/day = "
              f"{need:.3f} jobs/s; measured queue + store capacity {n / wall:.1f} jobs/s with jobs "
              f"{compress:g}x shorter than real: headroom {n / wall / need:.0f}x")
    finally:
        stop_workers(procs)
        redis.stop()


def start_sim_workers(n: int, toolchains: list[str], redis_url: str, db: Path, env: dict, logdir: Path) -> list:
    # each worker holds all 8 toolchains, as one machine with the whole matrix installed would; the
    # synthetic toolchains are not in the registry, so the worker is started from Python, not the CLI
    # the synthetic function is allowed in these workers' own processes only (ci.queue.wire.SafeJob)
    code = ("import sys; from ci.queue import worker as w; from ci.queue.jobs import WorkerSettings; "
            "from ci.queue.names import connect, queue_name; from ci.queue.wire import SERIALIZER, SafeJob; "
            "from rq import Queue; SafeJob.allowed = SafeJob.allowed | {'queue_bench.synthetic_execute'}; "
            "WorkerSettings.store = sys.argv[2]; conn = connect(sys.argv[1]); "
            "qs = [Queue(queue_name(t), connection=conn, job_class=SafeJob, serializer=SERIALIZER) "
            "for t in sys.argv[3].split(',')]; "
            "w._worker_class()(qs, connection=conn, job_monitoring_interval=30, job_class=SafeJob, "
            "serializer=SERIALIZER).work(logging_level='WARNING')")
    procs = []
    for i in range(n):
        log = open(logdir / f"sim-worker{i}.log", "w")
        procs.append(subprocess.Popen([sys.executable, "-c", code, redis_url, str(db), ",".join(toolchains)],
                                      stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        log.close()
    from redis import Redis
    from rq.worker import Worker
    conn = Redis.from_url(redis_url)
    deadline = time.monotonic() + 600
    while len(Worker.all(connection=conn)) < n:
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            sys.exit("bench: simulation workers did not start: " + (logdir / "sim-worker0.log").read_text()[-500:])
        time.sleep(0.2)
    return procs


def sim_write_times(redis_url: str) -> list[float]:
    from redis import Redis
    return [float(x) for x in Redis.from_url(redis_url).lrange(WRITES_KEY, 0, -1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--toolchains", default="gcc-11,gcc-12,clang-14,clang-19")
    ap.add_argument("--modes", default=",".join(MODES), help=f"part 1's runs, of {', '.join(MODES)}")
    ap.add_argument("--skip-real", action="store_true", help="simulation only (durations: --durations)")
    ap.add_argument("--durations", default="", help="job durations in s for the simulation without part 1 (comma-separated)")
    ap.add_argument("--sim-workers", type=int, default=64)
    ap.add_argument("--sim-series", type=int, default=60)
    ap.add_argument("--coordinators", type=int, default=4)
    ap.add_argument("--compress", type=float, default=100.0)
    ap.add_argument("--keep", action="store_true", help="keep the work dir (logs, stores) and print its path")
    args = ap.parse_args()
    print(f"queue bench, {os.cpu_count()} cores, {load()}")
    work = Path(tempfile.mkdtemp(prefix="sizewatch-queue-bench-"))
    try:
        durations = [float(d) for d in args.durations.split(",") if d.strip()]
        if not args.skip_real:
            modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
            if not modes or set(modes) - set(MODES):
                sys.exit(f"bench: --modes takes {', '.join(MODES)}")
            durations = bench_real(args.commits, args.toolchains.split(","), work, modes) or durations
        if args.sim_workers:
            if not durations:
                sys.exit("bench: the simulation needs job durations: run part 1 or give --durations")
            bench_sim(args.sim_workers, args.sim_series, args.coordinators, args.compress, durations, work)
    finally:
        if args.keep:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""compose.yaml is not run by the default test run (bench/container_run.py runs it under podman):
it is read with a YAML loader and every command it runs is checked against the real command table:
each ``sizewatch`` subcommand exists, each option it passes is one of that command's options, the
toolchains are in the registry and the images are built from the repository's Dockerfile. The
worker's ``security_opt`` is checked by running the sandbox probe with /proc masked as a container
engine masks it under those options (``unshare``: a mount and PID namespace, a fresh /proc, the
engine's masked paths), and the image's layers and contents against scripts/install.sh."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def resolve(argv: list[str]) -> tuple[click.Command, list[str]]:
    """The click command an argv names (through groups) and the rest of the argv."""
    from cli.main import group
    assert argv[0] == "sizewatch", argv
    cmd: click.Command = group
    rest = argv[1:]
    ctx = click.Context(group)
    while isinstance(cmd, click.Group):
        if cmd.invoke_without_command and (not rest or rest[0].startswith("-")):
            break                                          # a group that runs itself (sizewatch bot --inbox ...)
        sub = cmd.get_command(ctx, rest[0])
        assert sub is not None, f"no command {rest[0]!r} in {' '.join(argv)}"
        cmd, rest = sub, rest[1:]
    return cmd, rest


def test_compose_parses_and_has_the_services():
    doc = compose()
    services = doc["services"]
    assert {"redis", "postgres", "web", "bot", "worker"} <= set(services)
    assert services["redis"]["image"].startswith("redis:")
    assert services["postgres"]["image"].startswith("postgres:15")
    for name in ("web", "bot", "worker"):
        svc = services[name]
        assert svc["build"] == "." and (ROOT / "Dockerfile").is_file()
        env = svc["environment"]
        assert env["SIZEWATCH_DB"].startswith("postgresql://") and env["SIZEWATCH_REDIS"].startswith("redis://")
        assert "cache:/var/cache/sizewatch" in svc["volumes"]           # the shared tree and build dirs
        assert svc["init"] is True                                       # an init reaps what builds leave
        for value in svc["command"]:                                     # store URLs stay in the environment
            assert "postgresql://" not in value, (name, value)
    assert str(services["worker"]["deploy"]["replicas"]).startswith("${SIZEWATCH_WORKERS")
    assert set(doc["volumes"]) >= {"cache", "redis", "postgres", "unit-key"}
    # the unit cache's signing key (ci.pipeline.cache_key, ~/.config/sizewatch): the workers' alone,
    # never in the cache the dashboard and the bot share
    def spec(v) -> str:                       # short ("src:dst") or long ({type, source, target}) syntax
        return v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}"
    keyed = {n for n, svc in services.items() if any(spec(v).startswith("unit-key:") for v in svc.get("volumes", []))}
    assert keyed == {"worker"} and "unit-key:/root/.config/sizewatch" in services["worker"]["volumes"]


def test_compose_commands_exist_with_their_options():
    from toolchains.registry import load
    services = compose()["services"]
    seen = set()
    for name in ("web", "bot", "worker"):
        argv = services[name]["command"]
        cmd, rest = resolve(argv)
        seen.add(cmd.name)
        opts = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts}
        given = [a for a in rest if a.startswith("--")]
        assert given and all(a in opts for a in given), (name, [a for a in given if a not in opts])
        ctx = cmd.make_context(cmd.name, list(rest), resilient_parsing=True)   # the values parse
        assert ctx.params
        if name == "worker":
            for tc in ctx.params["toolchains"].split(","):
                load(tc)                                      # every toolchain is in the registry
            # the Redis URL, with its password, only in the environment: never on the command line
            assert "--redis" not in rest and ctx.params["redis_url"] is None
            assert services["worker"]["environment"]["SIZEWATCH_REDIS"].startswith(
                "redis://:${SIZEWATCH_REDIS_PASSWORD")
    # Redis requires that password, and Redis and PostgreSQL are on the internal network only
    redis = services["redis"]
    assert "--requirepass" in " ".join(redis["command"]) and "REDIS_PASSWORD" in redis["environment"]
    assert "REDIS_PASSWORD" in " ".join(redis["healthcheck"]["test"])
    nets = compose()["networks"]
    assert nets["back"]["internal"] is True
    assert redis["networks"] == services["postgres"]["networks"] == ["back"]
    assert set(services["web"]["networks"]) == {"front", "back"} and services["web"]["ports"]
    assert services["worker"]["networks"] == ["back"] and set(services["bot"]["networks"]) == {"front", "back"}
    bot = services["bot"]
    assert "--queue" not in bot["command"] and bot["environment"]["SIZEWATCH_QUEUE"].startswith("redis://:${")
    assert bot["environment"]["SIZEWATCH_DB"] == services["worker"]["environment"]["SIZEWATCH_DB"]
    assert seen == {"serve", "bot", "worker"}
    # the command lines its header tells the operator to run
    head = (ROOT / "compose.yaml").read_text().split("\nx-sizewatch")[0]
    lines = [ln.split("exec web ", 1)[1].split("  #")[0].split() for ln in head.splitlines() if "exec web sizewatch" in ln]
    assert lines
    for argv in lines:
        cmd, rest = resolve(argv)
        opts = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
        assert all(a in opts for a in rest if a.startswith("--")), argv
    for argv in lines:
        if argv[1] == "run" and "--series" in argv:
            series = argv[argv.index("--series") + 1]
            assert (ROOT / series).is_file(), f"{series}: the image's working directory is the source tree"


def test_the_bot_is_opt_in_and_its_inputs_are_never_created():
    """A fresh checkout has no list and no policy: the bot runs only with --profile bot, and the engine
    refuses a missing list or policy instead of creating empty directories in their place."""
    from ci.bot.policy import load_policy
    services = compose()["services"]
    bot = services["bot"]
    assert bot["profiles"] == ["bot"]
    assert all("profiles" not in services[s] for s in ("redis", "postgres", "web", "worker"))
    binds = {v["target"]: v for v in bot["volumes"] if isinstance(v, dict)}
    for target in ("/lists/linux-mm", "/etc/sizewatch/bot.toml"):
        assert binds[target]["type"] == "bind" and binds[target]["bind"]["create_host_path"] is False
        assert binds[target]["read_only"] is True
    default = binds["/etc/sizewatch/bot.toml"]["source"].split(":-", 1)[1].rstrip("}")
    policy = load_policy(ROOT / default)                      # the shipped example parses
    worker_tc = resolve(services["worker"]["command"])[0].make_context(
        "worker", resolve(services["worker"]["command"])[1], resilient_parsing=True).params["toolchains"].split(",")
    assert set(policy.toolchains) <= set(worker_tc)
    assert policy.outbox.startswith("/var/cache/sizewatch/") and policy.smtp is None   # mails nobody as shipped


# --- the worker's sandbox under the engine's /proc masks -------------------------------------------

# what runc is told by podman (containers-common) and Docker (moby's oci defaults) to hide: paths
# covered by /dev/null (files) or an empty read-only tmpfs (directories), and paths bound read-only.
# ``systempaths=unconfined`` drops both lists; seccomp/apparmor are not modelled (they do not touch them).
MASKED = ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/interrupts", "/sys/firmware",
          "/sys/devices/virtual/powercap"]
READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]

PROBE = "from toolchains.sandbox import unavailable; why = unavailable(); print(why or 'ok'); raise SystemExit(1 if why else 0)"


def _engine_paths(security_opt: list[str]) -> tuple[list[str], list[str]]:
    if "systempaths=unconfined" in security_opt:
        return [], []
    return MASKED, READONLY


def _probe_in_container(security_opt: list[str]) -> subprocess.CompletedProcess:
    """The sandbox probe (toolchains.sandbox.unavailable, its exact bwrap command) run in a new mount
    and PID namespace with a fresh /proc masked as the engine masks a container's under these options."""
    masked, readonly = _engine_paths(security_opt)
    script = ["set -e", "mount --make-rprivate /", "mount -t proc proc /proc"]
    for p in masked:
        script.append(f'if [ -d {p} ]; then mount -t tmpfs -o ro tmpfs {p}; elif [ -e {p} ]; then mount --bind /dev/null {p}; fi')
    for p in readonly:
        script.append(f"if [ -e {p} ]; then mount --bind {p} {p}; mount -o remount,bind,ro {p}; fi")
    script.append(f'exec "{sys.executable}" -c "{PROBE}"')
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SIZEWATCH_SANDBOX", None)
    return subprocess.run(["unshare", *user, "--mount", "--pid", "--fork", "sh", "-c", "\n".join(script)],
                          capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture(scope="module")
def namespaces():
    if shutil.which("bwrap") is None or shutil.which("unshare") is None:
        pytest.skip("needs bubblewrap and util-linux's unshare")
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    try:
        ok = subprocess.run(["unshare", *user, "--mount", "--pid", "--fork", "sh", "-c",
                             "mount --make-rprivate / && mount -t proc proc /proc"],
                            capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("cannot make a mount and PID namespace here (unshare refused)")


def test_the_sandbox_probe_passes_on_this_machine():
    from toolchains.sandbox import unavailable
    if shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap")
    assert unavailable() is None


def test_default_container_masks_stop_the_probe(namespaces):
    """The model is faithful: with the engine's default masks bwrap cannot mount its /proc (as in a
    container run with seccomp/apparmor=unconfined alone), and the probe says so in one line."""
    proc = _probe_in_container(["seccomp=unconfined", "apparmor=unconfined"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bubblewrap cannot sandbox builds here" in proc.stdout and "proc" in proc.stdout, proc.stdout


def test_the_worker_security_opt_lets_the_sandbox_probe_pass(namespaces):
    worker = compose()["services"]["worker"]
    assert "systempaths=unconfined" in worker["security_opt"]
    proc = _probe_in_container(worker["security_opt"])
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


# --- the image -------------------------------------------------------------------------------------

def _packages(*args: str) -> set[str]:
    out = subprocess.run(["bash", str(ROOT / "scripts/install.sh"), *args, "--list"], capture_output=True,
                         text=True, check=True, env=dict(os.environ, SIZEWATCH_INSTALL="full")).stdout
    return set(out.split())


def test_the_image_installs_the_runtime_packages_before_the_source():
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    final = lines[max(i for i, ln in enumerate(lines) if ln.startswith("FROM "))]
    body = lines[lines.index(final):]
    apt = next(i for i, ln in enumerate(body) if "install.sh --only apt" in ln)
    copy_all = body.index("COPY . .")
    assert apt < copy_all, "a source edit must not redo the apt layer"
    assert not any("COPY" in ln for ln in body[:apt] if "scripts/install.sh" not in ln)
    assert "ENV SIZEWATCH_INSTALL=runtime" in body[:apt]
    assert any("install.sh --only venv" in ln for ln in body[copy_all:])
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "**/node_modules"} <= set(ignored)


def test_the_runtime_profile_has_what_the_services_run_and_no_tests():
    full, runtime = _packages(), _packages("--runtime")
    assert runtime < full
    assert not runtime & {"chromium", "chromium-driver", "wrk", "public-inbox", "postgresql-15", "redis-server"}
    # the workers: compilers, sandbox, and --measure's QEMU with the plugin's build needs
    assert {"gcc-12", "clang-19", "bubblewrap", "qemu-system-x86", "libglib2.0-dev", "pkg-config", "dpkg-dev",
            "libc6-dev", "linux-source-6.1"} <= runtime


# --- the start order: commands wait for their store and queue, bounded --------------------------

def test_when_up_waits_bounded_and_says_so():
    from cli.common import when_up
    from db.pg import StoreUnavailable
    now = [0.0]
    said: list[str] = []
    tries = []

    def attempt():
        tries.append(now[0])
        if now[0] < 7:
            raise StoreUnavailable("postgresql://u@db:5432/x: connection refused")
        return "store"

    def sleep(s):
        now[0] += s
    assert when_up("the store", attempt, 120, (StoreUnavailable,), echo=said.append,
                   sleep=sleep, clock=lambda: now[0]) == "store"
    assert said == ["sizewatch: waiting up to 120 s for the store: postgresql://u@db:5432/x: connection refused",
                    "sizewatch: the store is up after 8 s"]
    assert all(b - a <= 5 for a, b in zip(tries, tries[1:]))          # backs off, 5 s at most

    now[0], said[:] = 0.0, []
    with pytest.raises(StoreUnavailable, match=r"connection refused \(waited 30 s\)"):
        when_up("the store", lambda: attempt() if now[0] > 1e9 else (_ for _ in ()).throw(
            StoreUnavailable("db: connection refused")), 30, (StoreUnavailable,), echo=said.append,
            sleep=sleep, clock=lambda: now[0])
    assert len(said) == 1                                              # one line, not one per try

    def wrong():
        raise ValueError("not a store")                                # not "unavailable": at once
    with pytest.raises(ValueError):
        when_up("the store", wrong, 30, (StoreUnavailable,), echo=said.append, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(StoreUnavailable, match="^db: down$"):         # --wait 0: the error as it was
        when_up("the store", lambda: (_ for _ in ()).throw(StoreUnavailable("db: down")), 0, (StoreUnavailable,),
                echo=said.append, sleep=sleep, clock=lambda: now[0])


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv", [
    ["worker", "--toolchains", "gcc-12", "--redis", "redis://127.0.0.1:{port}/0"],
    ["serve", "--port", "0"],
])
def test_commands_wait_for_their_servers_then_fail_in_one_line(argv, tmp_path):
    """Nothing listens: the command says it waits, waits --wait seconds, then fails in one line."""
    import time
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), SIZEWATCH_CACHE=str(tmp_path),
               SIZEWATCH_DB=f"postgresql://sizewatch:secret@127.0.0.1:{port}/sizewatch", SIZEWATCH_WAIT="3")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cli", *[a.format(port=port) for a in argv]],
                          capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    took = time.monotonic() - t0
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert lines[0].startswith(f"sizewatch: waiting up to 3 s for the store: postgresql://sizewatch@127.0.0.1:{port}/sizewatch: ")
    assert len(lines) == 2 and lines[1].startswith("sizewatch: ") and lines[1].endswith("(waited 3 s)"), lines
    assert "secret" not in proc.stderr
    assert 3 <= took < 30

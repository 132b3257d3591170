"""compose.yaml cannot be run here (no docker in CI): it is read with a YAML loader and every
command it runs is checked against the real command table: each ``sizewatch`` subcommand exists,
each option it passes is one of that command's options, the toolchains are in the registry and
the images are built from the repository's Dockerfile."""
from __future__ import annotations

from pathlib import Path

import click
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
        assert any(v.startswith("cache:") for v in svc["volumes"])      # the shared tree and build dirs
    assert str(services["worker"]["deploy"]["replicas"]).startswith("${SIZEWATCH_WORKERS")
    assert set(doc["volumes"]) >= {"cache", "redis", "postgres", "unit-key"}
    # the unit cache's signing key (ci.pipeline.cache_key, ~/.config/sizewatch): the workers' alone,
    # never in the cache the dashboard and the bot share
    keyed = {n for n, svc in services.items() if any(v.startswith("unit-key:") for v in svc.get("volumes", []))}
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
            assert ctx.params["redis_url"] == services["worker"]["environment"]["SIZEWATCH_REDIS"]
    assert seen == {"serve", "bot", "worker"}
    # the command lines its header tells the operator to run
    head = (ROOT / "compose.yaml").read_text().split("\nx-sizewatch")[0]
    lines = [ln.split("exec web ", 1)[1].split("  #")[0].split() for ln in head.splitlines() if "exec web sizewatch" in ln]
    assert lines
    for argv in lines:
        cmd, rest = resolve(argv)
        opts = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
        assert all(a in opts for a in rest if a.startswith("--")), argv

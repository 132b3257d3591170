"""``sizewatch toolchains [install NAME...]`` and ``sizewatch build``: thin click layers over
toolchains.install, toolchains.parallel_builds and toolchains.build.

A commit that does not build is a result: it is listed, and the exit status is 2.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from cli.common import one_line_errors, split
from toolchains.registry import DEFAULT_TOOLCHAINS
from toolchains.targets import DEFAULT_TARGETS


@click.group("toolchains", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="print the list as JSON")
@click.pass_context
def toolchains_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the registry's toolchains: installed or missing, with the exact compiler version."""
    if ctx.invoked_subcommand is not None:
        return
    from toolchains.install import statuses
    with one_line_errors():
        rows = statuses()
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return
    click.echo(f"{'toolchain':10} {'status':9} {'version':48} packages")
    for r in rows:
        pk = " ".join(r.packages) + ("" if r.suite == "bookworm" else f"  ({r.suite})")
        click.echo(f"{r.name:10} {'installed' if r.installed else 'missing':9} {(r.version or '-'):48} {pk}")


@toolchains_cmd.command("install")
@click.argument("names", nargs=-1, required=True)
def install_cmd(names: tuple[str, ...]) -> None:
    """Install toolchains NAMES (gcc-11, clang-22, ...) with apt-get."""
    from toolchains.install import install
    with one_line_errors():
        for r in install(list(names), log=lambda s: click.echo(f"sizewatch: {s}", err=True)):
            click.echo(f"{r.name:10} {'installed' if r.installed else 'missing':9} {r.version or '-'}")


def _memory(value: str) -> int | None:
    from toolchains.errors import BuildError
    v = value.strip().upper()
    if v in ("0", "NONE", "OFF"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)I?B?", v)
    if not m:
        raise BuildError(f"bad --memory {value!r} (e.g. 4G, 512M, none)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " "))


def _toolchains(value: str) -> list[str]:
    if value.strip() == "installed":
        from toolchains.registry import all_toolchains
        return [t.name for t in all_toolchains() if t.installed]
    return split(value)


@click.command("build")
@click.option("--tree", default="6.1", show_default=True,
              help="kernel git tree: a Debian linux-source version (6.1) or a path")
@click.option("--commits", "commit_spec", help="a commit, a list X,Y,Z, or a range A..B (A and what follows it)")
@click.option("--series", "mbox", type=click.Path(dir_okay=False, path_type=Path),
              help="a patch series (mbox): its base and every patch")
@click.option("--base", help="base commit for --series when the mbox has no base-commit:")
@click.option("--toolchains", "tcs", default=",".join(DEFAULT_TOOLCHAINS), show_default=True,
              help="comma-separated, or 'installed' for every installed one")
@click.option("--targets", default=",".join(DEFAULT_TARGETS), show_default=True,
              help="objects (mm/page_alloc.o), directories (mm/) or vmlinux, comma-separated")
@click.option("--config", "config_name", default="defconfig", show_default=True,
              type=click.Choice(["defconfig", "allocator", "tinyconfig"]),
              help="defconfig + DWARF5, allocator (tinyconfig + what mm/page_alloc.c needs), or tinyconfig + 64BIT + DWARF5 (toolchains/configs)")
@click.option("--fragment", type=click.Path(dir_okay=False, path_type=Path),
              help="extra config lines (CONFIG_X=y) for the config")
@click.option("--no-sandbox", is_flag=True, help="run make without bubblewrap (trusted trees only)")
@click.option("--ccache", is_flag=True, help="compile through ccache (off by default: measurements)")
@click.option("--no-reports", is_flag=True, help="skip the compilers' inline reports")
@click.option("--make", "always_make", is_flag=True, help="always run make (no replay of the compile)")
@click.option("--rebuild", is_flag=True, help="build again even if the results are kept")
@click.option("--timeout", type=float, default=900, show_default=True, help="seconds per commit × toolchain")
@click.option("--memory", default="4G", show_default=True, help="address-space limit per process (none: off)")
@click.option("-j", "--jobs", type=int, help="make -j (default: cores / parallel builds)")
@click.option("--parallel", type=int, help="toolchains built at once (default: cores)")
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
def build_cmd(tree: str, commit_spec: str | None, mbox: Path | None, base: str | None, tcs: str, targets: str,
              config_name: str, fragment: Path | None, no_sandbox: bool, ccache: bool, no_reports: bool,
              always_make: bool, rebuild: bool, timeout: float, memory: str, jobs: int | None,
              parallel: int | None, as_json: bool) -> None:
    """Build TARGETS at each commit under each toolchain; print where each object, log and report went.

    Exit status: 0 when everything built, 2 when some build failed (listed), 1 on bad input.
    """
    from toolchains import git as tgit
    from toolchains.build import BuildOptions
    from toolchains.errors import BuildError
    from toolchains.kbuild import preset, read_fragment
    from toolchains.parallel_builds import build_matrix
    from toolchains.progress import MatrixProgress
    from toolchains.sandbox import enabled_by_default
    from toolchains.source import cache_dir, open_tree
    with one_line_errors():
        if bool(commit_spec) == bool(mbox):
            raise BuildError("give either --commits (X, X,Y or A..B) or --series FILE.mbox")
        tgit.split_range(commit_spec or "")  # a bad range fails before any work (a tree unpacked)
        config = preset(config_name, read_fragment(fragment) if fragment else ())
        names = _toolchains(tcs)
        if not names:
            raise BuildError("no toolchains given")
        tlist = split(targets)
        if not tlist:
            raise BuildError("no targets given")
        path = open_tree(tree).path
        if mbox is not None:
            if not mbox.is_file():
                raise BuildError(f"{mbox}: no such mbox file")
            shas = tgit.series_commits(path, mbox, base, cache_dir() / "worktrees" / "am")
        else:
            shas = tgit.commit_list(path, commit_spec or "")
        options = BuildOptions(sandbox=enabled_by_default() and not no_sandbox, ccache=ccache,
                               reports=not no_reports, mode="kbuild" if always_make else "auto",
                               timeout=timeout or None, memory=_memory(memory), jobs=jobs,
                               use_cache=not rebuild)
        with MatrixProgress(len(shas) * len(names), subjects=tgit.subjects(path, shas)) as progress:
            builds = build_matrix(path, shas, names, tlist, config, options, progress.events, progress.on_build,
                                  parallel)
    if as_json:
        click.echo(json.dumps([b.to_dict() for b in builds], indent=2))
    else:
        for b in builds:
            for r in b.targets:
                click.echo(f"{b.toolchain} {b.sha[:12]} {r.target}: {r.status} ({r.method}: {r.reason})")
                for e in r.errors[:5]:
                    click.echo(f"    error   {e}")
                for label, p in (("object", r.path), ("report", r.report), ("log", r.log)):
                    if p is not None:
                        click.echo(f"    {label:7} {p}")
    if any(b.status != "ok" for b in builds):
        sys.exit(2)


"""``sizewatch bisect``: a thin click layer over ci.bisect."""
from __future__ import annotations

import sys

import click

from cli.common import db_option, one_line_errors, open_store
from toolchains.targets import DEFAULT_TARGETS


@click.command("bisect")
@click.argument("function")
@click.argument("commits", metavar="A..B")
@click.option("--toolchain", required=True, help="the compiler to judge under (a registry name: gcc-12, clang-19...)")
@click.option("--grew-by", "grew_by", type=int, default=None, metavar="N",
              help="first commit where the function is at least N bytes bigger than at A")
@click.option("--outlined", is_flag=True, help="first commit where the function has an out-of-line copy")
@click.option("--inlined", is_flag=True, help="first commit where the function is inlined with no out-of-line copy")
@click.option("--crossed-line", "crossed_line", is_flag=True,
              help="first commit where the function spans more 64-byte cache lines than at A")
@click.option("--tree", default="6.1", show_default=True,
              help="kernel git tree: a Debian linux-source version (6.1) or a path")
@click.option("--target", default=DEFAULT_TARGETS[0], show_default=True)
@click.option("--config", "config_name", default="defconfig", show_default=True, metavar="NAME",
              help="the kernel config the builds use (toolchains/configs: defconfig, allocator, tinyconfig)")
@click.option("--arch", default="x86_64", show_default=True, type=click.Choice(["x86_64", "arm64"]),
              help="the kernel's architecture (arm64: the config's arm64 twin, a cross gcc or clang's arm64 target)")
@click.option("--lto", default="none", show_default=True, type=click.Choice(["none", "thin"]),
              help="thin: the config built with clang ThinLTO (clang toolchains, --target vmlinux)")
@click.option("--json", "as_json", is_flag=True, help="print the result (and every step) as JSON")
@db_option
def bisect_cmd(function: str, commits: str, toolchain: str, grew_by: int | None, outlined: bool, inlined: bool,
               crossed_line: bool, tree: str, target: str, config_name: str, arch: str, lto: str, as_json: bool,
               db: str | None) -> None:
    """Find the first commit of A..B (first-parent) where FUNCTION starts to meet one condition.

    Stored results are read first; only the midpoints the search needs are built (and stored).
    Prints the commit, bloat-o-meter's row for the function and the compiler's inline remarks there.
    """
    import json
    from analyzer.errors import InputError
    from ci.bisect import Condition, bisect, text
    from toolchains.build import check_lto, toolchain_info
    from toolchains.kbuild import preset
    with one_line_errors():
        config = preset(config_name, arch=arch, lto="" if lto == "none" else lto)
        compiler = toolchain_info(toolchain, arch)      # looked up once (unknown or missing: one line), carried
        if config.lto:
            from toolchains.targets import check_linked_only
            check_lto(compiler.toolchain, config)
            check_linked_only([target], config.lto)
        chosen = [k for k, on in (("grew_by", grew_by is not None), ("outlined", outlined), ("inlined", inlined),
                                  ("crossed_line", crossed_line)) if on]
        if len(chosen) != 1:
            raise InputError("give exactly one of --grew-by N, --outlined, --inlined, --crossed-line")
        cond = Condition(chosen[0], grew_by or 0)
        with open_store(db) as store:
            res = bisect(store, tree, function, commits, compiler, cond, target, config,
                         progress=lambda s: print(s, file=sys.stderr))
            click.echo(json.dumps(res.to_dict(), indent=2) if as_json else text(res), nl=as_json)

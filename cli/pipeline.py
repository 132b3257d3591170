"""``sizewatch run``, ``history`` and ``report``: thin click layers over ci.pipeline and the store."""
from __future__ import annotations

from pathlib import Path

import click

from cli.common import db_option, one_line_errors, open_store, split, warn_damage
from toolchains.registry import DEFAULT_TOOLCHAINS
from toolchains.targets import DEFAULT_TARGETS


def runtime_options(f):
    """``--runtime-*``: when a measured fast path's change is a finding (analyzer.runtime_findings)."""
    f = click.option("--runtime-lines", default=1, show_default=True, metavar="N",
                     help="the fast path touching N more 64-byte lines per alloc/free pair is a finding (0: never)")(f)
    f = click.option("--runtime-percent", default=1.0, show_default=True, metavar="P",
                     help="... and by more than P %% of the parent's (0: the count alone judges)")(f)
    f = click.option("--runtime-instructions", default=2.0, show_default=True, metavar="N",
                     help="the fast path executing more than N more instructions per alloc/free pair under "
                          "QEMU TCG is a finding ...")(f)
    return f


def _runtime(instructions: float, percent: float, lines: int):
    from analyzer.runtime_findings import RuntimeThresholds
    return RuntimeThresholds(instructions, percent, lines)


@click.command("run")
@click.option("--tree", default="6.1", show_default=True,
              help="kernel git tree: a Debian linux-source version (6.1) or a path")
@click.argument("commits", required=False)
@click.option("--series", "mbox", type=click.Path(dir_okay=False, path_type=Path),
              help="a patch series as an mbox (git format-patch output)")
@click.option("--base", help="base commit for the series when its base-commit: is not in the tree")
@click.option("--toolchains", default=",".join(DEFAULT_TOOLCHAINS), show_default=True)
@click.option("--targets", default=",".join(DEFAULT_TARGETS), show_default=True,
              help="objects (mm/page_alloc.o), directories (mm/) or vmlinux, comma-separated")
@click.option("--config", "config_name", default="defconfig", show_default=True, metavar="NAME",
              help="a config of toolchains/configs: defconfig (+DWARF5), allocator (the page allocator "
                   "complete in a small SMP kernel, a few minutes per first vmlinux), tinyconfig")
@click.option("--arch", default="x86_64", show_default=True, type=click.Choice(["x86_64", "arm64"]),
              help="the kernel's architecture: arm64 builds with Debian's cross gcc (gcc-N-aarch64-linux-gnu) "
                   "or clang's arm64 target, from the config's arm64 twin (toolchains/configs/arm64/)")
@click.option("--lto", default="none", show_default=True, type=click.Choice(["none", "thin"]),
              help="thin: the config built with clang ThinLTO (CONFIG_LTO_CLANG_THIN; clang toolchains only); "
                   "its .o files are LLVM bitcode, so only --targets vmlinux is analysed")
@click.option("--keep-vmlinux", default=3, show_default=True, metavar="N",
              help="keep the vmlinux files of the N newest builds per toolchain and config in the cache "
                   "(the store keeps symbols, sections and facts of every build)")
@click.option("--cost-mcpu", default="skylake-avx512", show_default=True, metavar="CPU",
              help="llvm-mca CPU model for the likely paths' estimated cycles of new builds")
@click.option("--cost-lines", default=1, show_default=True, metavar="N",
              help="a hot function's likely path touching N more 64-byte lines is a finding (0: never)")
@click.option("--cost-cycles-percent", default=10.0, show_default=True, metavar="P",
              help="its estimated cycles growing by P %% is a finding (0: never)")
@click.option("--measure", "measure_spec", is_flag=False, flag_value="", default=None, metavar="[orders=0,4,8,n=N]",
              help="boot each vmlinux built under QEMU TCG and count the allocator's executed instructions per "
                   "alloc/free pair (default orders 0-8, n=10000 pairs each)")
@runtime_options
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--markdown", "as_md", is_flag=True, help="print the report as Markdown")
@click.option("--queue", "queue_url", default=None, metavar="REDIS_URL",
              help="hand the builds to workers on this Redis (sizewatch worker) instead of building here")
@click.option("--attempts", default=3, show_default=True, metavar="N",
              help="with --queue: a job failing N times is parked and reported, not retried again")
@db_option
def run_cmd(tree: str, commits: str | None, mbox: Path | None, base: str | None, toolchains: str,
            targets: str, config_name: str, arch: str, lto: str, keep_vmlinux: int, cost_mcpu: str, cost_lines: int,
            cost_cycles_percent: float, measure_spec: str | None, runtime_instructions: float,
            runtime_percent: float, runtime_lines: int, as_json: bool, as_md: bool,
            queue_url: str | None, attempts: int, db: str | None) -> None:
    """Build and analyze COMMITS (A..B) or a --series, store the results, print the per-patch report.

    What the store already holds is not built again: a second run prints the same report at once.
    With --queue the builds are enqueued (one job per commit and toolchain) and the report is
    printed once the store holds them all; jobs parked after --attempts are listed on stderr
    (exit status 1, the report shows their builds as missing).
    The likely-path thresholds apply to every comparison the run reports (stored pairs included);
    --cost-mcpu to the builds it makes (stored builds keep the CPU they were estimated for).
    """
    from analyzer.likely_path_cost import CostThresholds
    from ci import pipeline
    from ci.reports import text as render
    from analyzer.errors import InputError
    with one_line_errors():
        if bool(commits) == bool(mbox):
            raise InputError("give either a commit range A..B or --series FILE.mbox")
        if mbox is not None and not mbox.is_file():
            raise InputError(f"{mbox}: no such mbox file")
        if keep_vmlinux < 0:
            raise InputError("--keep-vmlinux: must be 0 or more")
        if commits:
            from toolchains.git import split_range
            split_range(commits)             # a bad range fails before any work
        from toolchains.kbuild import preset
        from toolchains.targets import check_linked_only, is_linked, parse
        config = preset(config_name, arch=arch, lto="" if lto == "none" else lto)
        for t in split(targets):
            parse(t)                         # a bad target fails before any work
        from toolchains.build import check_lto, toolchain_info
        # looked up once, before the store opens (unknown or missing ones fail here), then carried
        compilers = [toolchain_info(tc, arch) for tc in split(toolchains)]
        if config.lto:
            for c in compilers:
                check_lto(c.toolchain, config)           # gcc cannot build ThinLTO
            check_linked_only(split(targets), config.lto)
        thresholds = CostThresholds(lines=cost_lines, cycles_percent=cost_cycles_percent)
        runtime = _runtime(runtime_instructions, runtime_percent, runtime_lines)
        measure = None
        if measure_spec is not None:
            from ci.pipeline.measure import parse_measure
            measure = parse_measure(measure_spec)
            if not any(is_linked(t) for t in split(targets)):
                raise InputError("--measure: measures a built vmlinux: add vmlinux to --targets")
            if arch != "x86_64":
                raise InputError(f"--measure boots x86_64 kernels (qemu-system-x86_64): not {arch}")
        builds = pipeline.build_all
        if queue_url is not None:
            from ci.queue.coordinator import QueuedBuilds
            if attempts < 1:
                raise InputError("--attempts must be 1 or more")
            builds = QueuedBuilds(queue_url, attempts=attempts)
        with open_store(db) as store:
            report, stats = pipeline.run(store, tree, commits, mbox, base, compilers,
                                         split(targets), config, mcpu=cost_mcpu, thresholds=thresholds,
                                         keep_vmlinux=keep_vmlinux, builds=builds, measure=measure,
                                         runtime=runtime)
            click.echo(f"sizewatch: {stats.built} built, {stats.reanalyzed} re-analyzed, {stats.stored} already "
                       f"stored, {stats.failed} failed; store {store.path}", err=True)
            click.echo(render.to_json(report) if as_json else render.markdown(report) if as_md
                       else render.text(report), nl=False)
            failed = getattr(report, "series", None)
            if failed is not None and failed.status != "applied":
                raise InputError(failed.error or "the series did not apply")
            if stats.parked:                       # each was printed when it was parked
                from ci.queue.names import QueueError
                raise QueueError(f"{len(stats.parked)} build job(s) parked: the report lacks their builds "
                                 "(sizewatch queue status)")


@click.command("report")
@click.argument("ref")
@click.option("--toolchains", default=None, help="only these toolchains (comma-separated)")
@click.option("--targets", default=None, help="only these targets (comma-separated)")
@runtime_options
@click.option("--json", "as_json", is_flag=True)
@click.option("--markdown", "as_md", is_flag=True)
@db_option
def report_cmd(ref: str, toolchains: str | None, targets: str | None, runtime_instructions: float,
               runtime_percent: float, runtime_lines: int, as_json: bool, as_md: bool, db: str | None) -> None:
    """Print the stored report of a COMMIT (sha or prefix) or a SERIES (id or message-id).
    A measured vmlinux's fast path is a finding when it grew past the --runtime-* limits."""
    from ci.reports import text as render
    from ci.reports.model import commit_report, series_report
    from db.errors import StoreError
    with one_line_errors():
        runtime = _runtime(runtime_instructions, runtime_percent, runtime_lines)
        with open_store(db, read_only=True) as store:
            tcs, tgs = split(toolchains) or None, split(targets) or None
            if ref.isdigit() or "@" in ref:
                report = series_report(store, ref, tcs, tgs, runtime)
            else:
                commit = store.get_commit(ref)
                if commit is None:
                    raise StoreError(f"{ref!r}: no such commit or series in the store")
                report = commit_report(store, commit.sha, commit.tree, tcs, tgs, runtime=runtime)
            click.echo(render.to_json(report) if as_json else render.markdown(report) if as_md
                       else render.text(report), nl=False)
        warn_damage()


@click.command("history")
@click.argument("function")
@click.option("--toolchain", default=None, help="only this toolchain")
@click.option("--target", default=None, help="only this target")
@click.option("--inlined", is_flag=True,
              help="its inlined copies instead: instances and bytes in the whole target (kernel-wide in a vmlinux)")
@click.option("--json", "as_json", is_flag=True)
@db_option
def history_cmd(function: str, toolchain: str | None, target: str | None, inlined: bool, as_json: bool,
                db: str | None) -> None:
    """Size and inline status of FUNCTION (with its clones) across the stored commits; with --inlined,
    the instances and bytes of its inlined copies (from the stored inline cost)."""
    import json
    from db.errors import StoreError
    with one_line_errors():
        with open_store(db, read_only=True) as store:
            if inlined:
                _inlined_history(store, function, toolchain, target, as_json)
                return
            points = store.function_history(function, toolchain, target=target)
            if not points:
                raise StoreError(f"{function}: not found in any stored build")
            if as_json:
                click.echo(json.dumps([p.to_dict() for p in points], indent=2))
                return
            from toolchains.flavour import label
            click.echo(f"{'commit':12}  {'toolchain':9}  {'size':>6}  {'delta':>6}  {'inline status':28}  subject")
            last: dict[str, int | None] = {}
            for p in points:                   # a toolchain's arm64 and ThinLTO builds: lines of their own
                size = p.size if p.size is not None else 0
                line = label(p.toolchain, p.arch, p.lto)
                prev = last.get(line)
                delta = "" if prev is None else f"{size - prev:+d}"
                last[line] = size
                click.echo(f"{p.commit_sha[:12]}  {line:9}  {size:6d}  {delta:>6}  {_status(p):28}  "
                           f"{p.subject[:60]}")


def _inlined_history(store, function: str, toolchain: str | None, target: str | None, as_json: bool) -> None:
    """``history --inlined``: a row per stored build with an inline cost, in history order."""
    import json
    from db.errors import StoreError
    points = store.inline_history(function, toolchain, target=target)
    if not points:
        raise StoreError(f"{function}: not inlined in any stored build with an inline cost"
                         + (f" under {toolchain}" if toolchain else ""))
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in points], indent=2))
        return
    from toolchains.flavour import label
    click.echo(f"{'commit':12}  {'toolchain':9}  {'target':16}  {'inst':>5}  {'bytes':>7}  {'delta':>6}  "
               f"{'incl':>7}  {'callers':>7}  subject")
    last: dict[tuple[str, str], int] = {}
    for p in points:                       # a toolchain's arm64 and ThinLTO builds: lines of their own
        line = label(p.toolchain, p.arch, p.lto)
        prev = last.get((line, p.target))
        delta = "" if prev is None else f"{p.bytes - prev:+d}"
        last[(line, p.target)] = p.bytes
        click.echo(f"{p.commit_sha[:12]}  {line:9}  {p.target:16}  {p.instances:5d}  {p.bytes:7d}  {delta:>6}  "
                   f"{p.including:7d}  {p.callers:7d}  {p.subject[:50]}")


def _status(p) -> str:
    if p.declared is None:
        return "out of line" if p.size else "no out-of-line copy"
    where = "out of line" if p.out_of_line else "inlined only"
    n = f", inlined {p.inlined_count}x" if p.inlined_count else ""
    return f"{p.declared}: {where}{n}"


"""The pipeline behind ``sizewatch run``: build and analyze every commit of a range or series that the store lacks,
store it (one transaction per build), then report each patch against its parent from the store.

Stages, each skipping what is already stored so that a re-run (or a run after a
``kill -9``) only does what is missing:
  1. commits: a range ``A..B`` (first-parent) or an mbox applied with ``git am``;
  2. builds: (commit × toolchain × config) with all targets, analyzed with the remarks
     collected in the same compile, written by ``Store.record_build``;
  3. comparisons: head-vs-parent findings, bloat-o-meter tables and the inline-cost comparison per
     (toolchain, target), ``Store.record_comparison``;
  4. report: regenerated from the store (ci.reports), never from the objects.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from analyzer.likely_path_cost import CostThresholds, compare_costs, cost_findings, mcpu_mismatches
from analyzer.errors import InputError
from analyzer.runtime_findings import RuntimeThresholds
from analyzer.kinds import Kind
from ci.pipeline import analysis, builder, link_layout, vmlinux
from ci.pipeline.inline_costs import object_inline_cost
from ci.pipeline.measure import Measure
from ci.pipeline.objects import object_record
from ci.pipeline.plan import RunPlan, plan_range, plan_series
from ci.reports.model import (PatchReport, SeriesReport, commit_report, compute_tables, inline_report,
                              series_report)
from db import bloat_tables
from db.models import BuildRecord, Commit, ConfigInfo, FindingRow
from db.store import Store
from toolchains.kbuild import Config
from toolchains.locks import reading
from toolchains.retention import DEFAULT_KEEP, touch
from toolchains.mca import DEFAULT_MCPU, check_cpu
from toolchains.registry import DEFAULT_TOOLCHAINS
from toolchains.source import Tree, open_tree
from toolchains.build import ResolvedToolchain, check_lto, resolved
from toolchains.targets import DEFAULT_TARGETS, check_linked_only, is_linked


@dataclass
class RunStats:
    built: int = 0
    stored: int = 0                       # already in the store: nothing to do
    reanalyzed: int = 0
    failed: int = 0
    compared: int = 0
    lines: list[str] = field(default_factory=list)
    parked: list[str] = field(default_factory=list)   # queued jobs that failed every attempt (ci.queue)


def _record(store: Store, tree: Tree, commit: Commit, done: builder.Built, target: str,
            mcpu: str = DEFAULT_MCPU, arch: str = "x86_64") -> int:
    """Analyze one target of a build and write it all (one build row) in one transaction."""
    objects, findings = [], []
    path = done.objects.get(target)
    unusable: list[str] = []
    if path is not None and is_linked(target):
        # held while read: the retention pass (builder.prune_vmlinux) leaves it alone meanwhile
        try:
            with reading(path):
                touch(path)
                obj = object_record(path, target)
                res = vmlinux.analyze_vmlinux(path, done.source, vmlinux.unit_remarks(done.remarks), mcpu)
                obj.link_layout = link_layout.layout(path, target)      # hot functions at their link addresses
                obj.inline_cost = object_inline_cost(path, target, unit_keys=done.unit_keys.get(target))
        except FileNotFoundError:
            raise InputError(f"{path}: deleted before it was analyzed (another run's retention pass?)") from None
        except InputError as e:              # a vmlinux the analyzer cannot use: this build's result
            unusable, path = [str(e)], None
    elif path is not None:
        obj = object_record(path, target)
        res = analysis.analyze(path, done.source, done.remarks.get(target, []), mcpu)
        obj.inline_cost = object_inline_cost(path, target)
    if path is not None:
        obj.functions, obj.remarks, obj.facts = res.functions, res.remarks, res.facts
        obj.likely_paths = res.likely_paths
        findings += res.findings
        objects.append(obj)
        status = "ok"
    else:
        status = done.status if done.status != "ok" and not unusable else "failed"
    errors = unusable or (done.errors if path is None or done.status != "ok" else [])
    if path is None and not errors:
        errors = [f"no object {target} after the build"]
    rec = BuildRecord(tree.name, commit, done.toolchain, done.compiler_version,
                      ConfigInfo(done.config_key, arch, config_hash=done.config_hash, config_text=done.config_text),
                      target, status, done.family, done.method, done.seconds, log=done.log,
                      errors=errors, objects=objects, findings=findings,
                      analysis_version=analysis.ANALYSIS_VERSION if path is not None else 0,
                      tree_path=str(tree.path), runtime=done.runtimes.get(target))
    return store.record_build(rec, replace=False)     # a result another worker stored first is kept


@dataclass(frozen=True)
class BuildJob:
    """One unit of work: a commit under one toolchain and config, with the targets the store lacks.

    The same job is built in-process (``build_all``) or by a queue worker (``ci.queue``): both end
    in ``store_job``, so a queued build stores exactly what an in-process one stores."""
    tree: str                             # the tree's name in the store (linux-6.1)
    tree_path: str                        # the git tree the commit is in
    commit: Commit
    compiler: ResolvedToolchain           # looked up once: where the run began, or by the worker taking the job
    targets: tuple[str, ...]
    config: Config = Config()
    mcpu: str = DEFAULT_MCPU
    keep_vmlinux: int = DEFAULT_KEEP      # vmlinux files kept per (toolchain, config) once one is stored
    measure: Measure | None = None        # measure each built vmlinux under emulation (ci.pipeline.measure)

    @property
    def toolchain(self) -> str:
        """The toolchain's name (what the store, the queues and the build dirs are keyed by)."""
        return self.compiler.name

    @property
    def config_key(self) -> str:
        return builder.config_key(self.config)

    def measured(self, target: str) -> bool:
        """Whether ``target``'s build is measured too (a linked image of a ``--measure`` job)."""
        return self.measure is not None and is_linked(target)


def missing_targets(store: Store, job: BuildJob) -> list[str]:
    """The job's targets the store lacks (or holds from an older analysis) for its compiler version."""
    return [t for t in job.targets
            if not store.has_build(job.tree, job.commit.sha, job.toolchain, job.config_key, t, job.compiler.version,
                                   analysis.ANALYSIS_VERSION, job.measured(t))]


def store_job(store: Store, job: BuildJob, done: builder.Built, stats: RunStats | None = None,
              local: Path | None = None) -> str:
    """Analyze the built targets of ``job`` and write each (one transaction per build); a target another
    writer stored meanwhile is left as stored (one result per key). Returns the job's progress line.
    ``local``: the tree it was built in when not ``job.tree_path`` (a worker's own, ci.queue.trees); the
    store keeps naming the coordinator's."""
    stats = stats if stats is not None else RunStats()
    tree = Tree(job.tree, Path(job.tree_path))
    local = local or tree.path
    # the commit's source for the declarations, held while analyzing (this toolchain waits)
    with builder.source_for(local, job.commit.sha, job.toolchain, job.config, analysis.available()) as src:
        done.source = src
        for t in job.targets:
            have = store.find_build(job.tree, job.commit.sha, job.toolchain, job.config_key, t, done.compiler_version)
            if store.build_done(have, analysis.ANALYSIS_VERSION, job.measured(t)):
                stats.stored += 1             # a duplicate delivery or a second worker got there first
                continue
            _record(store, tree, job.commit, done, t, job.mcpu, job.config.arch)
            if have is not None:
                stats.reanalyzed += 1
            else:
                stats.built += 1
            if t not in done.objects:
                stats.failed += 1
    line = (f"{job.toolchain:9} {job.commit.sha[:12]} {' '.join(job.targets)}: {done.status} "
            f"({done.method}, {done.seconds:.1f} s)" + (f": {done.errors[0]}" if done.errors else ""))
    if any(is_linked(t) for t in job.targets):
        # the store has what reports need: only the newest vmlinux files of (toolchain, config) stay
        gone = builder.prune_vmlinux(
            local, job.toolchain, job.config, job.keep_vmlinux,
            lambda sha: store.has_build(job.tree, sha, job.toolchain, job.config_key, "vmlinux", done.compiler_version))
        if gone:
            line += f"; removed {len(gone)} older vmlinux file(s) from the cache (keeping {job.keep_vmlinux})"
    return line


def build_job(job: BuildJob, local: Path | None = None) -> builder.Built:
    """Build the job's targets (in ``local``, else ``job.tree_path``; a failed build is a result);
    ``store_job`` analyzes and writes it."""
    return builder.build(local or Path(job.tree_path), job.commit.sha, job.compiler, list(job.targets), job.config,
                         options=builder.options_for(list(job.targets), job.measure), measure=job.measure)


def plan_jobs(store: Store, plan: RunPlan, toolchains: list[ResolvedToolchain], targets: list[str],
              config: Config | None = None, mcpu: str = DEFAULT_MCPU,
              stats: RunStats | None = None, keep_vmlinux: int = DEFAULT_KEEP,
              measure: Measure | None = None) -> list[BuildJob]:
    """Stage 2's work list: per toolchain, per commit (oldest first), the targets the store lacks."""
    jobs = []
    for tc in toolchains:
        for commit in plan.to_build:
            job = BuildJob(plan.tree.name, str(plan.tree.path), commit, tc, tuple(targets), config or Config(), mcpu,
                           keep_vmlinux, measure)
            todo = missing_targets(store, job)
            if stats is not None:
                stats.stored += len(targets) - len(todo)
            if todo:
                jobs.append(replace(job, targets=tuple(todo)))
    return jobs


def build_all(store: Store, plan: RunPlan, toolchains: list[ResolvedToolchain], targets: list[str],
              config: Config | None = None, progress: Callable[[str], None] = lambda s: None,
              mcpu: str = DEFAULT_MCPU, keep_vmlinux: int = DEFAULT_KEEP, measure: Measure | None = None) -> RunStats:
    """Stage 2 in this process: every (commit, toolchain, target) the store lacks, built, analyzed and
    stored (likely-path cycles estimated for ``mcpu``; a build already stored keeps its own CPU's
    estimate); once a vmlinux is stored only the ``keep_vmlinux`` newest vmlinux files of that
    (toolchain, config) stay in the cache; with ``measure`` each built vmlinux is measured under emulation
    in its build's thread and stored with it. ``ci.queue.coordinator.QueuedBuilds`` is the same stage
    through build workers."""
    stats = RunStats()
    jobs = {(j.commit.sha, j.toolchain): j
            for j in plan_jobs(store, plan, toolchains, targets, config, mcpu, stats, keep_vmlinux, measure)}
    todos = [(j.commit.sha, j.compiler, list(j.targets)) for j in jobs.values()]
    # toolchains build side by side; each build is analyzed and stored as soon as it is done
    for key, done in builder.build_many(plan.tree.path, todos, config, builder.options_for(targets, measure),
                                        measure):
        line = store_job(store, jobs[key], done, stats)
        stats.lines.append(line)
        progress(line)
    return stats


_COST_KINDS = {Kind.LIKELY_PATH_CALL.value, Kind.LIKELY_PATH_LINES.value, Kind.LIKELY_PATH_CYCLES.value}


def _cost_keys(base_paths: dict, head_paths: dict, thresholds: CostThresholds) -> set[tuple[str, str]]:
    """The (kind, function) of the likely-path findings ``thresholds`` give on two stored builds."""
    out = set()
    for path, hp in head_paths.items():
        if path in base_paths:
            out |= {(f.kind, f.function) for f in cost_findings(compare_costs(base_paths[path], hp), thresholds)}
    return out


def compare_all(store: Store, plan: RunPlan, toolchains: list[ResolvedToolchain], targets: list[str],
                config: Config | None = None, thresholds: CostThresholds = CostThresholds(),
                progress: Callable[[str], None] = lambda s: None) -> int:
    """Stage 3: head-vs-parent findings for every stored pair not compared yet, with the bloat-o-meter
    tables every report of the pair shows (computed here once, stored with them).

    A pair compared before under other likely-path thresholds gets its findings again (its tables are
    kept): the stored findings, and so the report, follow the thresholds of the run that prints it.
    Cycle estimates made for different CPUs are not compared (no cycles finding): that is said."""
    key = builder.config_key(config)
    n = 0
    for compiler in toolchains:
        tc, version = compiler.name, compiler.version
        for commit in plan.commits:
            if not commit.parent_sha:
                continue
            for target in targets:
                head = store.find_build(plan.tree.name, commit.sha, tc, key, target, version)
                base = store.find_build(plan.tree.name, commit.parent_sha, tc, key, target, version)
                if not head or not base or head.status != "ok" or base.status != "ok":
                    continue
                # a comparison stored before its tables and counts were kept (0009) is made again
                base_paths, head_paths = store.likely_paths_for(base.id), store.likely_paths_for(head.id)
                for path, hp in head_paths.items():
                    odd = mcpu_mismatches(compare_costs(base_paths.get(path, []), hp))
                    if odd:
                        cpus = sorted({str(c.mcpu) for c in base_paths[path] + hp if c.cycles is not None})
                        progress(f"{tc:9} {commit.sha[:12]} {target}: cycle estimates of the parent and this "
                                 f"commit are for different CPUs ({', '.join(cpus)}): no cycles finding for "
                                 f"{', '.join(odd)}")
                keep_tables = False
                if store.has_comparison(head.id, base.id) and \
                        bloat_tables.from_stored(store.comparison_tables(head.id, base.id)) is not None:
                    stored = {(f.kind, f.function) for f in store.findings_for(head.id, base.id)
                              if f.kind in _COST_KINDS and f.base_build_id == base.id}
                    moves_missing = (is_linked(target) and store.link_moves_for(head.id, base.id) is None
                                     and store.link_layout_for(head.id) and store.link_layout_for(base.id))
                    if stored == _cost_keys(base_paths, head_paths, thresholds) and not moves_missing:
                        continue
                    keep_tables = True
                findings: list[FindingRow] = []
                base_facts, head_facts = store.object_facts(base.id), store.object_facts(head.id)
                for path, hf in head_facts.items():
                    if path in base_facts:
                        findings += analysis.compare(base_facts[path], hf, base_paths.get(path),
                                                     head_paths.get(path), thresholds)
                moves, link_found = (link_layout.compare_builds(store, base.id, head.id) if is_linked(target)
                                     else (None, []))      # vmlinux: who moved, and why
                tables = None if keep_tables else bloat_tables.to_stored(compute_tables(store, base.id, head.id))
                inline = None if keep_tables else inline_report(store, base.id, head.id)
                store.record_comparison(head.id, base.id, findings + link_found, tables,
                                        inline.to_dict() if inline else None, link_moves=moves)
                n += 1
    return n


def report(store: Store, plan: RunPlan, toolchains: list[str], targets: list[str],
           runtime: RuntimeThresholds = RuntimeThresholds()) -> SeriesReport | list[PatchReport]:
    """Stage 4, from the store alone; ``runtime``: when a measured fast path's change is a finding."""
    if plan.series is not None:
        return series_report(store, plan.series.id, toolchains, targets, runtime)
    return [commit_report(store, c.sha, plan.tree.name, toolchains, targets, runtime=runtime) for c in plan.commits]


def run(store: Store, tree_spec: str, range_spec: str | None = None, mbox: Path | None = None,
        base: str | None = None, toolchains: list[str] | list[ResolvedToolchain] = list(DEFAULT_TOOLCHAINS),
        targets: list[str] = list(DEFAULT_TARGETS), config: Config | None = None,
        progress: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
        mcpu: str = DEFAULT_MCPU, thresholds: CostThresholds = CostThresholds(),
        keep_vmlinux: int = DEFAULT_KEEP, builds: Callable[..., RunStats] = build_all,
        measure: Measure | None = None, runtime: RuntimeThresholds = RuntimeThresholds()):
    """The whole pipeline; returns (report, stats). ``builds`` is stage 2: ``build_all`` in this
    process (the default), or a ``ci.queue.coordinator.QueuedBuilds`` handing the jobs to workers.
    ``measure``: each vmlinux built is also measured under emulation (``ci.pipeline.measure``);
    ``runtime``: when a measured fast path's change is a finding in the report. ``toolchains``: names,
    looked up here once (unknown or missing ones fail before any work), or as a command resolved them."""
    check_cpu(mcpu)                         # an unknown CPU fails before any build too
    if measure is not None:
        from ci.pipeline.measure import check_available
        check_available()
    compilers = [resolved(tc, config or Config()) for tc in toolchains]   # before any work
    for c in compilers:
        if config is not None:
            check_lto(c.toolchain, config)   # ThinLTO is clang's
    if config is not None:
        check_linked_only(targets, config.lto)    # under LTO the .o files are bitcode: vmlinux only
    tree = open_tree(tree_spec)
    if mbox is not None:
        plan = plan_series(store, tree, mbox, base)
    elif range_spec:
        plan = plan_range(store, tree, range_spec)
    else:
        raise InputError("give a commit range A..B or --series FILE.mbox")
    extra = {"measure": measure} if measure is not None else {}
    stats = builds(store, plan, compilers, targets, config, progress, mcpu, keep_vmlinux=keep_vmlinux, **extra)
    stats.compared = compare_all(store, plan, compilers, targets, config, thresholds, progress)
    return report(store, plan, [c.name for c in compilers], targets, runtime), stats


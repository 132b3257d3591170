"""The report model: what every rendering of a result shows, assembled from the store alone.

Per patch and toolchain: the bloat-o-meter tables against the parent commit (stored with the
comparison, or regenerated from stored symbols: byte-identical to ``sizediff`` on the two
objects either way) and the findings, in report order (``analyzer.kinds``). Rendered as text,
Markdown and JSON by ``ci.reports.text``, as mail by ``ci.reports.mail`` and as HTML by the
dashboard's commit page; nothing else decides what a report contains or in what order.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from analyzer import bloat, formats
from analyzer.bloat import Comparison, SymbolSet
from analyzer.likely_path_cost import MEASURES, CostChange, compare_costs, measure
from analyzer.inline_cost import InlineCost
from analyzer.inline_cost_diff import (CalleeDelta, CallerDelta, FileDelta, InlineCostDiff,
                                      compare as compare_inline_cost)
from analyzer.kinds import INLINE_CHANGES, Kind, order
from analyzer.link_layout import HotPlacement, Move
from analyzer.link_views import changed
from analyzer.nm import Listing
from analyzer.runtime_findings import RuntimeThresholds, compare as runtime_compare
from analyzer.sections import SIZE_HEADER, SectionSizes, size_line
from ci.reports.runtime import RuntimeReport, runtime_report
from db import bloat_tables
from db.errors import StoreError
from db.inline_cost import scope_note, to_inline_cost
from db.models import Build, Commit, FindingRow, Series, SymbolRow
from db.store import Store
from toolchains.flavour import lto_of_key
from toolchains.registry import sort_key
from toolchains.targets import is_linked


def _size_dict(s: SectionSizes | None) -> dict | None:
    return None if s is None else {"text": s.text, "data": s.data, "bss": s.bss, "dec": s.dec}


def stored_size(store: Store, build_id: int) -> SectionSizes:
    """``size`` totals of a stored build (its objects summed, as ``size`` sums one file's sections)."""
    out = SectionSizes()
    for o in store.objects_for(build_id):
        out.text, out.data, out.bss = out.text + o.text, out.data + o.data, out.bss + o.bss
    return out


def finding_order(f: FindingRow) -> tuple:
    """Report order of findings: changes against the parent first, then by kind (``analyzer.kinds``),
    then by function."""
    return (f.base_build_id is None, order(f.kind), f.function)


def symbol_set(rows: list[SymbolRow], label: str = "store") -> SymbolSet:
    """Stored symbols as the SymbolSet bloat.diff() takes (one listing: sizes sum by name anyway)."""
    return SymbolSet(label, [Listing([r.name for r in rows], [r.size for r in rows],
                                     "".join(r.letter for r in rows), [r.section or "" for r in rows])])


@dataclass
class InlineTotals:
    """One build's caller symbols (those some DWARF range falls in), split: ``size == inlined + own +
    undescribed`` (analyzer.inline_cost), with the bytes of inlined code in them."""
    callers: int = 0
    size: int = 0
    inlined: int = 0
    own: int = 0
    undescribed: int = 0

    @classmethod
    def of(cls, ic: InlineCost) -> "InlineTotals":
        t = cls(len(ic.callers))
        for c in ic.callers.values():
            t.size, t.inlined, t.own, t.undescribed = (t.size + c.size, t.inlined + c.inlined, t.own + c.own,
                                                       t.undescribed + c.undescribed)
        return t

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class InlineReport:
    """Where a patch's inlined code landed under one toolchain (issue 14): the parent's and this
    build's stored inline cost compared per inlined callee and per declaring file."""
    diff: InlineCostDiff
    old: InlineTotals
    new: InlineTotals
    scope: str = ""                     # '' : whole files; else the units a big vmlinux was limited to

    @property
    def changed(self) -> bool:
        """Worth a table: some callee's bytes or instances, or some declaring file's, changed."""
        return bool(self.diff.callees or self.diff.files)

    def to_dict(self) -> dict:
        return {**self.diff.to_dict(), "totals": {"old": self.old.to_dict(), "new": self.new.to_dict()},
                "scope": self.scope}


def inline_report_from_dict(d: dict) -> InlineReport:
    """An InlineReport as stored with its comparison (``InlineReport.to_dict``, 0014)."""
    callees = [CalleeDelta(r["name"], r["decl_file"], r["instances_old"], r["instances_new"], r["old"], r["new"],
                           [CallerDelta(c["symbol"], c["old"], c["new"]) for c in r["callers"]],
                           r["including_old"], r["including_new"]) for r in d["callees"]]
    files = [FileDelta(f["file"], f["instances_old"], f["instances_new"], f["old"], f["new"]) for f in d["files"]]
    diff = InlineCostDiff(callees, files, d["inlined"]["old"], d["inlined"]["new"], d["unattributed"]["old"],
                          d["unattributed"]["new"])
    return InlineReport(diff, InlineTotals(**d["totals"]["old"]), InlineTotals(**d["totals"]["new"]), d["scope"])


def stored_inline_report(store: Store, base_id: int, head_id: int) -> InlineReport | None:
    """The inline-cost comparison stored with the pair (computed once by the pipeline), else made
    from the two builds' rows (a pair compared before 0014, or a damaged row: the same report)."""
    doc = store.comparison_inline_cost(head_id, base_id)
    if doc:
        try:
            return inline_report_from_dict(doc)
        except (KeyError, TypeError, ValueError):
            pass
    return inline_report(store, base_id, head_id)


def inline_report(store: Store, base_id: int, head_id: int) -> InlineReport | None:
    """The two builds' inline cost compared, from their rows (None: one of them has none stored)."""
    base_recs, head_recs = store.inline_costs_for(base_id), store.inline_costs_for(head_id)
    base, head = to_inline_cost(base_recs), to_inline_cost(head_recs)
    if base is None or head is None:
        return None
    scope = scope_note(base_recs + head_recs)
    return InlineReport(compare_inline_cost(base, head), InlineTotals.of(base), InlineTotals.of(head), scope)


@dataclass
class ToolchainReport:
    """One (toolchain, config, target) at one commit, against the same build of its parent."""
    toolchain: str
    toolchain_version: str
    target: str
    config_key: str
    status: str                         # the build's: ok | failed | timeout | killed
    build_id: int
    base_build_id: int | None = None
    base_status: str | None = None      # None: the parent was not built
    tables: list[Comparison] = field(default_factory=list)   # default bloat-o-meter mode
    findings: list[FindingRow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    analyzed: bool = False              # inline facts stored (analysis_version > 0)
    carried: int = 0                    # single-object findings the parent build has too (same kind, function)
    link_layout: list[HotPlacement] = field(default_factory=list)   # linked targets: hot functions' addresses
    link_moves: list[Move] | None = None     # ... and against the parent: how far each moved, and why
    inline_cost: InlineReport | None = None   # None: not stored for one of the two builds
    size: SectionSizes | None = None    # a linked target's ``size`` totals (vmlinux), this build
    base_size: SectionSizes | None = None   # and its parent's
    runtime: RuntimeReport | None = None    # measured under emulation (vmlinux, 0016); None: not measured
    likely_paths: list[tuple[str, CostChange]] = field(default_factory=list)   # (object, change) per hot function
    text: int | None = None             # the build's objects' .text bytes, this build
    base_text: int | None = None        # and its parent's
    arch: str = "x86_64"                # the config's kernel arch
    lto: str = ""                       # "thin": built with ThinLTO (toolchains.flavour)

    @property
    def link_changed(self) -> list[Move]:
        """The hot functions whose address, size, lines or phase changed, or that came or went."""
        return changed(self.link_moves)

    @property
    def size_text(self) -> str:
        """``size``'s own lines for the parent and this build (vmlinux targets), then the change."""
        if self.size is None:
            return ""
        lines = [SIZE_HEADER]
        if self.base_size is not None:
            lines.append(size_line(self.base_size, f"{self.target} (parent)"))
        lines.append(size_line(self.size, self.target))
        if self.base_size is not None:
            b, h = self.base_size, self.size
            lines.append(f"change: text {h.text - b.text:+d}, data {h.data - b.data:+d}, "
                         f"bss {h.bss - b.bss:+d}, total {h.dec - b.dec:+d}")
        return "\n".join(lines) + "\n"

    @property
    def bloat_text(self) -> str:
        return formats.bloat_text(self.tables) if self.tables else ""

    @property
    def net(self) -> int | None:
        return self.tables[0].net if self.tables else None

    def to_dict(self) -> dict:
        return {"toolchain": self.toolchain, "toolchain_version": self.toolchain_version, "target": self.target,
                "config": self.config_key, "arch": self.arch, "lto": self.lto or "none", "status": self.status,
                "build_id": self.build_id,
                "base_build_id": self.base_build_id, "base_status": self.base_status, "seconds": self.seconds,
                "tables": [formats.table_dict(t) for t in self.tables], "bloat_text": self.bloat_text,
                "findings": [f.to_dict() for f in self.findings], "errors": self.errors, "analyzed": self.analyzed,
                "new_in_build": [f.to_dict() for f in self.new_in_build], "carried": self.carried,
                "link_layout": [p.to_dict() for p in self.link_layout],
                "link_moves": None if self.link_moves is None else [m.to_dict() for m in self.link_moves],
                "inline_cost": self.inline_cost.to_dict() if self.inline_cost else None,
                **({"size": _size_dict(self.size), "base_size": _size_dict(self.base_size)} if self.size else {}),
                **({"runtime": self.runtime.to_dict()} if self.runtime else {}),
                "text": {"old": self.base_text, "new": self.text,
                         "delta": None if self.text is None or self.base_text is None else self.text - self.base_text},
                "likely_paths": self.likely_path_rows()}

    def likely_path_rows(self) -> list[dict]:
        """Per hot function, the likely path's measures in the parent's build and this one (issue 15):
        what the commit page's table and the JSON report both show."""
        rows = []
        for path, ch in self.likely_paths:
            row: dict = {"function": ch.function, "object": path, "new_calls": list(ch.new_calls),
                         "gone_calls": list(ch.gone_calls)}
            for m in MEASURES:
                row[m] = {"old": measure(ch.base, m), "new": measure(ch.head, m), "delta": ch.delta(m)}
            row["mcpu"] = (ch.head or ch.base).mcpu
            if ch.cpus_differ:          # two CPU models' estimates: shown, not compared
                row["cycles"]["note"] = f"estimated for {ch.base.mcpu} (old) and {ch.head.mcpu} (new): not compared"
            rows.append(row)
        return rows

    @property
    def changes(self) -> list[FindingRow]:
        """Head-vs-parent findings (newly inlined/out of line, pushed, boundary crossings)."""
        return [f for f in self.findings if f.base_build_id is not None]

    @property
    def new_in_build(self) -> list[FindingRow]:
        """Findings about this build alone that its parent build did not have (store order)."""
        return [f for f in self.findings if f.base_build_id is None and not f.data.get("_carried")]

    @property
    def ordered_changes(self) -> list[FindingRow]:
        """``changes`` in report order."""
        return sorted(self.changes, key=finding_order)

    @property
    def inline_changes(self) -> list[FindingRow]:
        """Functions newly inlined, newly out of line or pushed out of line, in report order."""
        return [f for f in self.ordered_changes if f.kind in INLINE_CHANGES]

    @property
    def crossings(self) -> list[FindingRow]:
        """Hot functions that grew across an alignment or cache-line boundary."""
        return [f for f in self.changes if f.kind == Kind.BOUNDARY_CROSSING]

    @property
    def other_changes(self) -> list[FindingRow]:
        """Changes that are neither inline changes nor boundary crossings."""
        return [f for f in self.changes if f.kind not in INLINE_CHANGES and f.kind != Kind.BOUNDARY_CROSSING]


@dataclass
class PatchReport:
    commit: Commit | None               # None when the patch did not apply
    position: int | None = None         # n of [PATCH n/m], None for a plain commit
    subject: str = ""
    status: str = "applied"             # applied | failed | skipped
    error: str = ""
    toolchains: list[ToolchainReport] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"commit": self.commit.to_dict() if self.commit else None, "position": self.position,
                "subject": self.subject, "status": self.status, "error": self.error,
                "toolchains": [t.to_dict() for t in self.toolchains]}


@dataclass
class SeriesReport:
    series: Series
    patches: list[PatchReport]

    def to_dict(self) -> dict:
        d = self.series.to_dict()
        d.pop("patches")
        return {"series": d, "patches": [p.to_dict() for p in self.patches]}


def _wanted(b: Build, toolchains: list[str] | None, targets: list[str] | None) -> bool:
    return (not toolchains or b.toolchain in toolchains) and (not targets or b.target in targets)


def _symbols(store: Store, build_id: int, cache: dict | None) -> SymbolSet:
    if cache is None:
        return symbol_set(store.symbols_for(build_id))
    if build_id not in cache:
        cache[build_id] = symbol_set(store.symbols_for(build_id))
    return cache[build_id]


def compute_tables(store: Store, base_id: int, head_id: int, cache: dict | None = None) -> list[Comparison]:
    """bloat-o-meter's default tables of two stored builds, from their symbols."""
    return bloat.diff(_symbols(store, base_id, cache), _symbols(store, head_id, cache))


def comparison_tables(store: Store, base_id: int, head_id: int, cache: dict | None = None) -> list[Comparison]:
    """The tables stored with the comparison (migration 0009), else computed from the symbols: the same
    tables either way (a store from before 0009, or a pair the pipeline has not compared)."""
    stored = bloat_tables.from_stored(store.comparison_tables(head_id, base_id))
    return stored if stored is not None else compute_tables(store, base_id, head_id, cache)


def runtime_findings(rep: ToolchainReport, thresholds: RuntimeThresholds) -> list[FindingRow]:
    """The fast-path findings of a measured vmlinux against its parent's measurement: made when the
    report is read (the thresholds are the reader's: ``sizewatch report --runtime-*``, the bot's
    ``[report] runtime_*``), never stored; changes against the parent like the stored ones."""
    if rep.runtime is None or rep.base_build_id is None:
        return []
    return [FindingRow(f.kind, f.function, f.severity, f.message, f.to_dict(), rep.base_build_id)
            for f in runtime_compare(rep.runtime.diff, rep.target, thresholds)]


def toolchain_report(store: Store, build: Build, parent_sha: str | None, cache: dict | None = None,
                     runtime: RuntimeThresholds = RuntimeThresholds()) -> ToolchainReport:
    """``cache`` (build id -> SymbolSet) lets a series report read each patch's symbols once;
    ``runtime``: when a measured fast path's change is a finding."""
    rep = ToolchainReport(build.toolchain, build.toolchain_version, build.target, build.config_key,
                          build.status, build.id, errors=build.errors, seconds=build.seconds,
                          analyzed=build.analysis_version > 0, arch=build.arch, lto=lto_of_key(build.config_key))
    base = (store.find_build(build.tree, parent_sha, build.toolchain, build.config_key, build.target,
                             build.toolchain_version) if parent_sha else None)
    if base is not None:
        rep.base_build_id, rep.base_status = base.id, base.status
    if base is not None and base.status == "ok" and build.status == "ok":
        rep.tables = comparison_tables(store, base.id, build.id, cache)
        rep.inline_cost = stored_inline_report(store, base.id, build.id)
    if is_linked(build.target) and build.status == "ok":
        rep.size = stored_size(store, build.id)
        if base is not None and base.status == "ok":
            rep.base_size = stored_size(store, base.id)
    base_ok = base is not None and base.status == "ok"
    if build.status == "ok":
        objects = store.objects_for(build.id)
        rep.text = sum(o.text for o in objects) if objects else None
        head_paths = store.likely_paths_for(build.id)
        base_paths = store.likely_paths_for(base.id) if base_ok else {}
        rep.likely_paths = [(path, ch) for path in sorted(head_paths.keys() | base_paths.keys())
                            for ch in compare_costs(base_paths.get(path, []), head_paths.get(path, []))]
    if base_ok:
        base_objects = store.objects_for(base.id)
        rep.base_text = sum(o.text for o in base_objects) if base_objects else None
    rep.findings = store.findings_for(build.id, rep.base_build_id)
    if is_linked(build.target):
        rep.runtime = runtime_report(store, build.id, base.id if base is not None else None)
        rep.findings += runtime_findings(rep, runtime)
    if build.status == "ok":            # linked targets (0015); nothing stored for objects
        rep.link_layout = [p for ps in store.link_layout_for(build.id).values() for p in ps]
        if rep.link_layout and base is not None and base.status == "ok":
            rep.link_moves = store.link_moves_for(build.id, base.id)
    if base is not None and base.status == "ok":
        before = {(f.kind, f.function) for f in store.findings_for(base.id) if f.base_build_id is None}
        for f in rep.findings:
            if f.base_build_id is None and (f.kind, f.function) in before:
                f.data["_carried"] = True
                rep.carried += 1
    return rep


def commit_report(store: Store, rev: str, tree: str | None = None, toolchains: list[str] | None = None,
                  targets: list[str] | None = None, cache: dict | None = None,
                  runtime: RuntimeThresholds = RuntimeThresholds()) -> PatchReport:
    commit = store.get_commit(rev, tree)
    if commit is None:
        raise StoreError(f"commit {rev!r} is not in the store")
    builds = [b for b in store.builds_for_commit(commit.sha, commit.tree) if _wanted(b, toolchains, targets)]
    latest: dict[tuple, Build] = {}
    for b in builds:                    # several compiler versions of one name: the latest build
        latest[(b.toolchain, b.config_key, b.target)] = b
    order = {t: i for i, t in enumerate(toolchains or [])}      # the caller's order, else gcc then clang by version
    # then x86_64 before the other arches (whichever was written first: workers finish in any order)
    chosen = sorted(latest.values(), key=lambda b: (order.get(b.toolchain, len(order)), sort_key(b.toolchain),
                                                    b.arch != "x86_64", b.arch, b.target))
    reps = [toolchain_report(store, b, commit.parent_sha, cache, runtime) for b in chosen]
    return PatchReport(commit, subject=commit.subject, toolchains=reps)


def series_report(store: Store, ref: int | str, toolchains: list[str] | None = None,
                  targets: list[str] | None = None, runtime: RuntimeThresholds = RuntimeThresholds()) -> SeriesReport:
    series = store.get_series(ref)
    if series is None:
        raise StoreError(f"series {ref!r} is not in the store")
    patches = []
    cache: dict = {}
    for p in series.patches:
        if p.commit_sha:
            rep = commit_report(store, p.commit_sha, series.tree, toolchains, targets, cache, runtime)
            rep.position, rep.subject, rep.status, rep.error = p.position, p.subject, p.status, p.error
        else:
            rep = PatchReport(None, p.position, p.subject, p.status, p.error)
        patches.append(rep)
    return SeriesReport(series, patches)


# --- what a human is told about -------------------------------------------------------------

@dataclass(frozen=True)
class Reportable:
    """One finding flagged for a human (by the bot's policy): what a mail marks with ``>>``."""
    kind: str                          # an analyzer.kinds.Kind value
    message: str
    position: int | None = None        # the patch; None: the whole series
    toolchain: str = ""
    function: str = ""
    reasons: tuple[str, ...] = ()      # the compiler's own words, when it gave any
    data: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        return f"{self.position if self.position is not None else '-'}|{self.toolchain}|{self.kind}|{self.function}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["reasons"] = list(self.reasons)
        return d


_ABS = re.compile(r"(?<![^\s'\"(\[])/[^\s:'\"]*?/(?:worktrees|build)/[^/\s:'\"]+/")


def tree_relative(line: str) -> str:
    """Compiler messages name files the way developers see them (mm/page_alloc.c:5704:28), not by
    the bot's worktree or build directory (``<cache>/worktrees/<name>/``, ``<cache>/build/<name>/``)."""
    return _ABS.sub("", line)


def reportable_order(r: Reportable) -> tuple:
    """Mail order: by patch, toolchain, kind (``analyzer.kinds``), function."""
    return (r.position or 0, r.toolchain, order(r.kind), r.function)

"""Plain dataclasses in and out of the store: no ORM, no sqlite types leak to callers.

The same classes serve writing (``id`` left None) and reading (``id`` filled in).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from analyzer import finding_details
from analyzer.finding_details import Details
from analyzer.likely_path_cost import FunctionCost
from analyzer.link_layout import HotPlacement
from analyzer.inline_cost import CallerCost, FileCost, Unattributed
from analyzer.runtime import Runtime


@dataclass
class Commit:
    sha: str
    parent_sha: str | None = None
    subject: str = ""
    author: str = ""
    date: str = ""                 # committer date, ISO 8601
    tree: str = ""
    id: int | None = None
    generation: int | None = None  # first-parent depth: orders commits along history

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ConfigInfo:
    """A kernel config as built: the toolchains' key plus a hash of the resulting .config."""
    key: str
    arch: str = "x86_64"
    base: str = ""
    fragment: str = ""
    config_hash: str = ""
    config_text: str | None = None      # the .config (stored compressed); None when not read


@dataclass
class SymbolRow:
    """One line of ``nm --size-sort`` plus the symbol's offset (st_value)."""
    name: str
    size: int
    letter: str
    section: str | None          # None for common symbols
    offset: int = 0


@dataclass
class FunctionRow:
    """Inline facts of one function (the analyzer's FunctionFacts, key fields as columns)."""
    name: str
    size: int = 0
    declared: str = "unknown"
    out_of_line: bool = False
    inlined_count: int = 0
    inlined_bytes: int = 0
    callers: int = 0
    facts: dict = field(default_factory=dict)


@dataclass
class RemarkRow:
    """One compiler inline decision (gcc -fopt-info, clang optimization record)."""
    callee: str | None
    caller: str | None
    passed: bool
    reason: str = ""
    location: str = ""


@dataclass
class FindingRow:
    kind: str
    function: str = ""
    severity: str = ""
    message: str = ""
    data: dict = field(default_factory=dict)      # Finding.to_dict()
    base_build_id: int | None = None              # None: a finding about the object alone
    # data["details"] read once as its kind's class (what readers use); the store passes the one it read
    details: Details | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.details is None:
            self.details = finding_details.read(self.kind, _raw_details(self.data))

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "details"}


def _raw_details(data: object) -> object:
    """The details dict inside a finding's data (None when the data holds none)."""
    return data.get("details") if isinstance(data, dict) else None


@dataclass
class InlineCalleeRow:
    """One inlined callee of an object as stored (analyzer.inline_cost.CalleeCost with its units
    counted, not named: a header helper sits in hundreds of a vmlinux's units)."""
    name: str
    decl_file: str | None
    instances: int = 0
    bytes: int = 0
    including: int = 0
    empty: int = 0
    units: int = 0
    callers: dict[str, int] = field(default_factory=dict)     # caller symbol -> bytes, biggest first

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class InlineCostRecord:
    """An object's inline cost as stored (migration 0014): what ``db.inline_cost.to_inline_cost``
    turns back into an analyzer.inline_cost.InlineCost for a comparison."""
    path: str                                     # the object, relative to the build dir
    units: int
    callees: list[InlineCalleeRow] = field(default_factory=list)
    callers: list[CallerCost] = field(default_factory=list)
    files: list[FileCost] = field(default_factory=list)
    unattributed: Unattributed = field(default_factory=Unattributed)
    inlined_bytes: int = 0
    scope: tuple[str, ...] = ()                   # the units read when restricted; () : the whole file

    def to_dict(self) -> dict:
        return {"path": self.path, "units": self.units, "scope": list(self.scope),
                "inlined_bytes": self.inlined_bytes, "unattributed": self.unattributed.to_dict(),
                "callees": [c.to_dict() for c in self.callees], "callers": [c.to_dict() for c in self.callers],
                "files": [f.to_dict() for f in self.files]}


@dataclass
class BuildPoint:
    """Where a point of a function's history was read: one stored build of one commit."""
    commit_sha: str
    subject: str
    date: str
    toolchain: str
    toolchain_version: str
    target: str
    build_id: int


@dataclass
class InlinePoint(BuildPoint):
    """An inline function in one stored build (``sizewatch history --inlined``, the function page):
    its instances and bytes summed over the build's objects; 0 where the build's inline cost is
    stored but the function is inlined nowhere."""
    instances: int
    bytes: int
    including: int
    callers: int
    units: int
    decl_files: list[str] = field(default_factory=list)
    arch: str = "x86_64"           # the build's kernel arch and LTO mode (toolchains.flavour)
    lto: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RuntimePoint(BuildPoint):
    """A function in one measured build (the function page's runtime history): per order, its executed
    instructions, calls and lines per alloc/free pair; an order the function did not run in is absent."""
    orders: dict[int, tuple[float, float, int]] = field(default_factory=dict)   # order -> (instructions, calls, lines)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["orders"] = {str(k): {"instructions": i, "calls": c, "lines": ln} for k, (i, c, ln) in self.orders.items()}
        return d


@dataclass
class ObjectRecord:
    """One built object with everything read from it."""
    path: str                                     # relative to the build dir
    sha256: str = ""
    text: int = 0
    data: int = 0
    bss: int = 0
    sections: dict[str, int] = field(default_factory=dict)
    symbols: list[SymbolRow] = field(default_factory=list)
    functions: list[FunctionRow] = field(default_factory=list)
    remarks: list[RemarkRow] = field(default_factory=list)
    facts: dict | None = None                     # the analyzer's ObjectFacts.to_dict() (stored zlib JSON)
    id: int | None = None
    likely_paths: list[FunctionCost] = field(default_factory=list)   # hot functions' likely paths
    link_layout: list[HotPlacement] = field(default_factory=list)    # hot functions at link addresses (vmlinux)
    inline_cost: InlineCostRecord | None = None   # where inlined code lands (0014); None: not computed


@dataclass
class BuildRecord:
    """Everything one build produced; ``Store.record_build`` writes it in one transaction."""
    tree: str
    commit: Commit
    toolchain: str
    toolchain_version: str
    config: ConfigInfo
    target: str
    status: str                                   # ok | failed | timeout | killed
    toolchain_family: str = ""
    method: str = ""
    seconds: float = 0.0
    started_at: str = ""
    log: str = ""
    errors: list[str] = field(default_factory=list)
    objects: list[ObjectRecord] = field(default_factory=list)
    findings: list[FindingRow] = field(default_factory=list)   # about the objects alone
    analysis_version: int = 0
    tree_path: str = ""
    runtime: Runtime | None = None                # the vmlinux measured under emulation (0016); None: not measured


@dataclass
class Build:
    """A stored build (read side); the log is fetched separately (``Store.build_log``)."""
    id: int
    tree: str
    commit_sha: str
    toolchain: str
    toolchain_version: str
    config_key: str
    target: str
    status: str
    method: str
    seconds: float
    started_at: str
    errors: list[str]
    analysis_version: int
    config_hash: str = ""
    arch: str = "x86_64"                # the config's kernel arch (x86_64, arm64)

    def to_dict(self) -> dict:
        return asdict(self)


def build_complete(status: str, analysis_version: int, wanted_analysis: int, measured: bool = True) -> bool:
    """Whether a stored build needs nothing more: a failure is a result (complete as it is); an ok build is
    complete once analyzed at ``wanted_analysis`` or later and, where a measurement is wanted, ``measured``.
    The one rule behind ``Store.build_done``/``has_build`` and ``record_build(replace=False)``."""
    return status != "ok" or (analysis_version >= wanted_analysis and measured)


@dataclass
class SeriesPatch:
    position: int
    subject: str = ""
    message_id: str = ""
    author: str = ""
    commit_sha: str | None = None
    status: str = "applied"        # applied | failed | skipped
    error: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Series:
    tree: str
    message_id: str
    subject: str = ""
    version: int = 1
    author: str = ""
    date: str = ""
    cover: str = ""                # cover letter text (stored compressed)
    base_sha: str = ""
    status: str = "applied"        # applied | failed
    error: str = ""
    created_at: str = ""
    patches: list[SeriesPatch] = field(default_factory=list)
    id: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class HistoryPoint:
    """One function in one stored build: the rows of ``sizewatch history`` and the function page."""
    commit_sha: str
    subject: str
    date: str
    toolchain: str
    toolchain_version: str
    target: str
    build_id: int
    status: str
    size: int | None               # summed symbol size (bloat-o-meter's view); None: no symbol
    declared: str | None           # from the inline facts; None when not analyzed
    out_of_line: bool | None
    inlined_count: int | None
    arch: str = "x86_64"           # the build's kernel arch and LTO mode (toolchains.flavour)
    lto: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FunctionLine:
    """One (toolchain, arch, LTO mode, target) of a function's history: lists aligned with ``FunctionSeries.commits``,
    None where that commit has no build under it (or the build has no symbol / no facts of it)."""
    toolchain: str
    target: str
    build_id: list[int | None]
    status: list[str | None]
    size: list[int | None]
    declared: list[str | None]
    out_of_line: list[bool | None]
    inlined_count: list[int | None]
    arch: str = "x86_64"           # one line per toolchain, arch and LTO mode (toolchains.flavour)
    lto: str = ""

    def has(self, i: int) -> bool:
        return self.build_id[i] is not None


@dataclass
class FunctionSeries:
    """A function across the stored commits as columns: the commits in history order, and a line per
    (toolchain, target) holding each commit's latest build there (lines in no particular order)."""
    name: str
    commits: list[Commit]
    lines: list[FunctionLine]

    @property
    def points(self) -> int:
        return sum(len(ln.build_id) - ln.build_id.count(None) for ln in self.lines)


@dataclass
class MatrixRow:
    """One function across the toolchains of a commit: {toolchain: (size, declared, out_of_line, inlined)}."""
    name: str
    cells: dict[str, tuple[int | None, str | None, bool | None, int | None]]

    @property
    def differs(self) -> bool:
        vals = list(self.cells.values())
        return any(v[0] != vals[0][0] or v[2] != vals[0][2] for v in vals[1:]) if vals else False

    def to_dict(self) -> dict:
        return {"name": self.name, "cells": {k: {"size": v[0], "declared": v[1], "out_of_line": v[2],
                                                 "inlined_count": v[3]} for k, v in self.cells.items()}}


@dataclass
class BuildSummary:
    """One build of a commit next to its parent's build: what a cell of the dashboard's index and
    series pages shows, without regenerating the bloat-o-meter tables.

    The findings counted are the ones a report lists: changes against the parent plus the build's
    own findings that the parent build does not have; ``carried`` counts the own findings the parent
    build has too. ``worst`` is the most severe (changes before the build's own), without its data.
    """
    commit_sha: str
    build_id: int
    toolchain: str
    toolchain_version: str
    config_key: str
    target: str
    status: str
    errors: list[str]
    text: int | None                    # size(1) text of the build's objects; None for a failed build
    base_build_id: int | None = None
    base_status: str | None = None
    base_text: int | None = None
    severities: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)
    worst: FindingRow | None = None
    carried: int = 0
    arch: str = "x86_64"                # the config's kernel arch

    @property
    def text_delta(self) -> int | None:
        return None if self.text is None or self.base_text is None else self.text - self.base_text

    @property
    def findings(self) -> int:
        return sum(self.severities.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(text_delta=self.text_delta, findings=self.findings)
        if d["worst"]:
            d["worst"].pop("data", None)
        return d

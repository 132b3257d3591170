"""What the build API takes and returns: options, one result per target, one per commit build.

Plain data (``to_dict`` for JSON): the CLI prints it, the pipeline stores it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from toolchains.kbuild import Config
from toolchains.sandbox import enabled_by_default


@dataclass(frozen=True)
class BuildOptions:
    sandbox: bool = field(default_factory=enabled_by_default)
    ccache: bool = False                  # off by default: measurements want real compiles
    reports: bool = True                  # the compilers' inline reports, per object target
    mode: str = "auto"                    # auto | kbuild (always make) | replay (force the fast path)
    timeout: float | None = 900.0         # per commit × toolchain build
    memory: int | None = 4 << 30          # address-space limit per process
    jobs: int | None = None               # make -j (default: all cores)
    use_cache: bool = True                # take results already kept for the commit
    cache: Path | None = None             # default: toolchains.source.cache_dir()
    out_root: Path | None = None          # where results are kept (default <cache>/objects)


@dataclass
class TargetResult:
    target: str
    kind: str                             # object | dir | vmlinux
    status: str                           # ok | failed | timeout | killed
    method: str                           # cached | reused | replay | kbuild
    reason: str
    path: Path | None = None              # the kept object, archive or vmlinux
    report: Path | None = None            # the compiler's inline report
    log: Path | None = None
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0                  # wall time of this target's build steps
    report_seconds: float = 0.0           # an extra compile for the report (make path only)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("path", "report", "log"):
            d[k] = str(d[k]) if d[k] is not None else None
        return d


_METHOD_COST = {"cached": 0, "reused": 1, "replay": 2, "kbuild": 3}


@dataclass
class CommitBuild:
    tree: Path
    sha: str
    toolchain: str
    family: str
    compiler_version: str
    config: Config
    config_text: str | None
    build_dir: Path
    worktree: Path
    out_dir: Path
    targets: list[TargetResult]
    seconds: float

    @property
    def status(self) -> str:
        bad = [t.status for t in self.targets if t.status != "ok"]
        return bad[0] if bad else "ok"

    @property
    def method(self) -> str:
        """The most expensive way any target was obtained."""
        return max((t.method for t in self.targets), key=_METHOD_COST.get, default="cached")

    @property
    def errors(self) -> list[str]:
        return [e for t in self.targets for e in t.errors]

    def result(self, target: str) -> TargetResult | None:
        return next((t for t in self.targets if t.target == target), None)

    def summary(self) -> str:
        """One line per build, for progress output and logs."""
        parts = [f"{t.target} {t.status} ({t.method}, {t.seconds + t.report_seconds:.1f} s)" for t in self.targets]
        line = f"{self.toolchain:9} {self.sha[:12]} " + "; ".join(parts)
        if self.errors:
            line += f": {self.errors[0]}"
        return line

    def to_dict(self) -> dict:
        return {"tree": str(self.tree), "sha": self.sha, "toolchain": self.toolchain, "family": self.family,
                "compiler_version": self.compiler_version, "config": self.config.key,
                "status": self.status, "method": self.method, "seconds": round(self.seconds, 3),
                "build_dir": str(self.build_dir), "out_dir": str(self.out_dir),
                "targets": [t.to_dict() for t in self.targets]}


@dataclass(frozen=True)
class Event:
    kind: str                # start (a target begins: detail is the method) | done (result set)
    toolchain: str
    sha: str
    target: str
    detail: str = ""
    result: TargetResult | None = None


Events = Callable[[Event], None]

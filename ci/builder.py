"""Builds for the pipeline: one call per (commit, toolchain), results as plain data.

Adapter over toolchains.build so the pipeline does not depend on how builds are run
(incremental make or replay of the object's compile, the inline report in that same
compile, sandboxed, time- and memory-limited). Objects stay where toolchains.build keeps
them: <cache>/objects/<toolchain>/<config>/<sha>/<target>, the report beside each.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from toolchains import build as tbuild
from toolchains.kbuild import Config
from toolchains.registry import Toolchain


@dataclass
class Built:
    """What one build of one commit under one toolchain produced."""
    sha: str
    toolchain: str
    compiler_version: str
    family: str
    config_key: str
    config_hash: str
    config_text: str | None
    status: str                                   # ok | failed | timeout | killed
    method: str                                   # cached | reused | replay | kbuild
    seconds: float
    log: str
    errors: list[str]
    objects: dict[str, Path] = field(default_factory=dict)          # target -> object file
    remarks: dict[str, list[Path]] = field(default_factory=dict)    # target -> compiler remark files
    source: Path | None = None                    # a checkout of the commit (for declarations)


def toolchain_info(name: str) -> tuple[Toolchain, str]:
    """The registry entry and exact compiler version (BuildError when unknown or not installed)."""
    return tbuild.toolchain_info(name)


def config_key(config: Config | None = None) -> str:
    return (config or Config()).key


def checkout(tree: Path, sha: str, toolchain: str, config: Config | None = None) -> Path:
    """The toolchain's worktree at ``sha`` (source for the analyzer's declaration lookups)."""
    return tbuild.checkout(tree, sha, toolchain, config or Config())


def build(tree: Path, sha: str, toolchain: str, targets: list[str], config: Config | None = None,
          log: Callable[[str], None] = lambda s: None,
          options: tbuild.BuildOptions | None = None) -> Built:
    """Build ``targets`` at ``sha``; a failed build is a result (status and the compiler's errors)."""
    b = tbuild.build_commit(tree, sha, toolchain, targets, config or Config(), options or tbuild.BuildOptions())
    logs = []
    for r in b.targets:
        if r.log is not None and r.log.exists():
            logs.append(r.log.read_text(errors="replace"))
    text = b.config_text
    return Built(b.sha, b.toolchain, b.compiler_version, b.family, b.config.key,
                 hashlib.sha256(text.encode()).hexdigest() if text else "", text, b.status, b.method,
                 b.seconds, "\n".join(logs), b.errors,
                 {r.target: r.path for r in b.targets if r.ok and r.path is not None},
                 {r.target: [r.report] for r in b.targets if r.ok and r.report is not None})

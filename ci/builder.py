"""Builds for the pipeline: one call per (commit, toolchain), results as plain data.

Adapter over the toolchain layer so the pipeline does not depend on how builds
are run. Until toolchains.build (the toolchain matrix issue) exists this drives
toolchains.kbuild directly, one object at a time, keeping each object per
commit under <cache>/objects/<toolchain>/<config>/<sha>/<target>, and gets the
compiler's inline report by replaying the object's compile with the report flags.
"""
from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from toolchains.errors import BuildError
from toolchains.locks import file_lock
from toolchains.kbuild import Config, make_cmd, prepare
from toolchains.registry import Toolchain, load
from toolchains.source import cache_dir
from toolchains.worktree import ensure_worktree


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
    method: str
    seconds: float
    log: str
    errors: list[str]
    objects: dict[str, Path] = field(default_factory=dict)          # target -> object file
    remarks: dict[str, list[Path]] = field(default_factory=dict)    # target -> compiler remark files
    source: Path | None = None                    # a checkout of the commit (for declarations)


_versions: dict[str, str] = {}


def toolchain_info(name: str) -> tuple[Toolchain, str]:
    """The registry entry and exact compiler version (BuildError when unknown or not installed)."""
    tc = load(name)
    if name not in _versions:
        _versions[name] = tc.version()
    return tc, _versions[name]


def config_key(config: Config | None = None) -> str:
    return (config or Config()).key


def _worktree_path(toolchain: str, config: Config) -> Path:
    return cache_dir() / "worktrees" / f"{toolchain}-{config.key}"


def checkout(tree: Path, sha: str, toolchain: str, config: Config | None = None) -> Path:
    """The toolchain's worktree at ``sha`` (source for the analyzer's declaration lookups)."""
    config = config or Config()
    with file_lock(cache_dir() / f".pipeline-{toolchain}-{config.key}.lock"):
        return ensure_worktree(tree, _worktree_path(toolchain, config), sha)


def build(tree: Path, sha: str, toolchain: str, targets: list[str], config: Config | None = None,
          log: Callable[[str], None] = lambda s: None) -> Built:
    """Build ``targets`` at ``sha``; one pipeline at a time per (toolchain, config) worktree and build dir."""
    config = config or Config()
    with file_lock(cache_dir() / f".pipeline-{toolchain}-{config.key}.lock"):
        return _build(tree, sha, toolchain, targets, config)


def _build(tree: Path, sha: str, toolchain: str, targets: list[str], config: Config) -> Built:
    tc, version = toolchain_info(toolchain)
    cache = cache_dir()
    wt_path = _worktree_path(tc.name, config)
    build_dir = cache / "build" / f"{tc.name}-{config.key}"
    t0 = time.monotonic()
    objects: dict[str, Path] = {}
    logs: list[str] = []
    errors: list[str] = []
    status, method = "ok", "cached"
    wt = None
    for target in targets:
        keep = cache / "objects" / tc.name / config.key / sha / target
        if keep.exists():
            objects[target] = keep
            continue
        method = "kbuild"
        try:
            wt = ensure_worktree(tree, wt_path, sha)
            prepare(wt, build_dir, tc, config)
        except BuildError as e:
            status = "failed"
            errors.append(str(e))
            logs.append(str(e))
            continue
        obj = build_dir / target
        obj.unlink(missing_ok=True)            # never take a stale object for this commit's
        try:
            proc = subprocess.run(make_cmd(wt, build_dir, tc, config, target), capture_output=True, text=True,
                                  errors="replace", timeout=BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            status = "timeout"
            errors.append(f"make {target} timed out after {BUILD_TIMEOUT} s")
            obj.unlink(missing_ok=True)
            continue
        logs.append(proc.stdout + proc.stderr)
        if proc.returncode != 0 or not obj.exists():
            status = "failed"
            errors += compiler_errors(proc.stderr) or [f"make {target} failed (exit {proc.returncode})"]
            continue
        keep.parent.mkdir(parents=True, exist_ok=True)
        tmp = keep.with_suffix(".tmp")
        shutil.copyfile(obj, tmp)
        tmp.rename(keep)
        objects[target] = keep
    remarks: dict[str, list[Path]] = {}
    for target, keep in objects.items():
        got = _remarks(tree, wt_path, build_dir, tc, sha, target, keep)
        if got is not None:
            remarks[target] = [got]
    cfg = build_dir / ".config"
    text = cfg.read_text() if cfg.exists() else None
    return Built(sha, tc.name, version, tc.family, config.key,
                 hashlib.sha256(text.encode()).hexdigest() if text else "", text, status, method,
                 time.monotonic() - t0, "\n".join(logs), errors, objects, remarks, wt)


BUILD_TIMEOUT = 900
_DIAG = re.compile(r"^\S+:\d+(?::\d+)?: (?:fatal )?error: |^(?:gcc|clang|cc1)\S*: (?:fatal )?error: ")


def compiler_errors(stderr: str, limit: int = 20) -> list[str]:
    """The compiler's error lines (``file:line:col: error: ...``), else make's own error lines."""
    lines = [ln.rstrip() for ln in stderr.splitlines()]
    got = [ln for ln in lines if _DIAG.search(ln)]
    if not got:
        got = [ln for ln in lines if "error" in ln.lower()]
    return got[:limit]


REMARK_FLAGS = {
    "gcc": lambda f: [f"-fopt-info-inline-missed={f}"],
    "clang": lambda f: ["-fsave-optimization-record", f"-foptimization-record-file={f}",
                        "-foptimization-record-passes=inline"],
}


def _remarks(tree: Path, wt_path: Path, build_dir: Path, tc: Toolchain, sha: str, target: str,
             keep: Path) -> Path | None:
    """The compiler's inline report for one object, kept beside it (``<object>.remarks``).

    Replays kbuild's compile command (``<builddir>/<dir>/.<obj>.cmd``) with the report flags,
    writing the object to a scratch file: one extra compile per object, done once.
    """
    out = keep.with_name(keep.name + ".remarks")
    if out.exists():
        return out
    rel = Path(target)
    cmdfile = build_dir / rel.parent / f".{rel.name}.cmd"
    if rel.suffix != ".o" or tc.family not in REMARK_FLAGS or not cmdfile.exists():
        return None
    line = cmdfile.read_text(errors="replace").splitlines()[0]
    if ":=" not in line:
        return None
    args = shlex.split(line.split(":=", 1)[1].split(";")[0])
    with tempfile.TemporaryDirectory(dir=keep.parent) as tmp:
        report = Path(tmp) / "remarks"
        new = []
        for a in args:
            if a.startswith("-Wp,-MMD,"):
                a = f"-Wp,-MMD,{tmp}/dep.d"
            elif a == target:
                a = f"{tmp}/out.o"
            new.append(a)
        ensure_worktree(tree, wt_path, sha)
        proc = subprocess.run([*new, *REMARK_FLAGS[tc.family](report)], cwd=build_dir, capture_output=True)
        if proc.returncode != 0 or not report.exists():
            return None
        part = out.with_suffix(".part")
        shutil.copyfile(report, part)
        part.rename(out)
    return out

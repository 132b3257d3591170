"""Build one commit of a kernel tree under one toolchain and config: the build API.

``build_commit(tree, sha, "gcc-12", ["mm/page_alloc.o"])`` returns a ``CommitBuild`` with one
``TargetResult`` per target: status (ok | failed | timeout | killed), how it was obtained
(cached | reused | replay | kbuild, and why), the kept object, the compiler's inline report,
the log, the compiler's error lines. Nothing is raised for a commit that does not build:
that is a result. ``toolchains.matrix`` runs many commits × toolchains on top of this.

Per (tree, toolchain, config) there is one worktree and one persistent build dir
(toolchains.layout), used under a file lock. Each object target takes the cheapest safe way:
its result already kept for this commit (cached); nothing it reads changed since the build
dir last compiled it (reused: the earlier result is the same bytes); only its own source
changed (replay: kbuild's command run directly, inline report flags in the same compile);
otherwise make (then one more compile for the inline report). Directories and vmlinux
always go through make, which rebuilds only what changed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from toolchains import buildstate, cmdfile, inline_report, process, replay
from toolchains.errors import BuildError
from toolchains.kbuild import Config, is_prepared, make_cmd, prepare
from toolchains.layout import Layout, atomic_copy, atomic_write
from toolchains.locks import file_lock
from toolchains.process import Limits, Outcome
from toolchains.registry import Toolchain, load
from toolchains.sandbox import Sandbox, default_masks, enabled_by_default
from toolchains.sandbox import unavailable as sandbox_unavailable
from toolchains.source import cache_dir
from toolchains.targets import Target, collect, parse, remove_partial
from toolchains.worktree import ensure_worktree

REPORT = ".remarks"          # <target>.remarks: the compiler's inline report
LOG = ".log"                 # <target>.log: what was run and what it printed
RECORD = ".json"             # <target>.json: the result, written last


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

_versions: dict[str, str] = {}
_versions_lock = threading.Lock()


def toolchain_info(name: str) -> tuple[Toolchain, str]:
    """The registry entry and exact compiler version (BuildError when unknown or not installed)."""
    tc = load(name)
    with _versions_lock:
        if name not in _versions:
            _versions[name] = tc.version()
        return tc, _versions[name]


def nm_for(tc: Toolchain) -> str:
    llvm = tc.make_vars.get("LLVM")
    if llvm is None:
        return "nm"
    return f"llvm-nm{llvm}" if llvm.startswith("-") else f"{llvm.rstrip('/')}/llvm-nm" if llvm != "1" else "llvm-nm"


def layout(tree: Path, toolchain: str, config: Config, options: BuildOptions) -> Layout:
    return Layout(options.cache or cache_dir(), Path(tree), toolchain, config, options.out_root)


def ccache_path(lay: Layout, tc: Toolchain) -> Path:
    """A directory of ``<compiler> -> ccache`` links put first on PATH: ccache's masquerade mode
    keeps kbuild's command lines (CC=gcc-12) unchanged, so turning it on or off rebuilds nothing."""
    bindir = lay.ccache_dir / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("ccache")
    if exe is None:
        raise BuildError("ccache is not installed (apt-get install ccache)")
    for name in {tc.compiler, *tc.make_vars.values()}:
        if not name or "/" in name or name.startswith("-") or shutil.which(name) is None:
            continue
        link = bindir / name
        if not link.is_symlink():
            tmp = bindir / f".{name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(exe)
            tmp.replace(link)
    return bindir


def sandbox_for(lay: Layout, tc: Toolchain, options: BuildOptions) -> Sandbox:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env: list[tuple[str, str]] = []
    writable = [lay.build_dir]
    readable = [lay.tree, lay.worktree]
    if options.ccache:
        bindir = ccache_path(lay, tc)
        path = f"{bindir}:{path}"
        store = lay.ccache_dir / "store"
        store.mkdir(parents=True, exist_ok=True)
        env += [("CCACHE_DIR", str(store))]
        writable.append(store)
        readable.append(bindir)
    if not options.sandbox:
        return Sandbox(False, path=path, env_extra=tuple(env))
    why = sandbox_unavailable()
    if why:
        raise BuildError(f"{why}; for trusted trees only: --no-sandbox or SIZEWATCH_SANDBOX=0")
    return Sandbox(True, tuple(writable), tuple(readable), tuple(default_masks(lay.cache)), path, tuple(env))


def _record_path(out_dir: Path, t: Target, suffix: str) -> Path:
    return out_dir / (t.output + suffix)


def _cached(lay: Layout, sha: str, t: Target, version: str, reports: bool) -> TargetResult | None:
    out = lay.out_dir(sha)
    try:
        data = json.loads(_record_path(out, t, RECORD).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if data.get("compiler_version") != version:
        return None
    log = _record_path(out, t, LOG)
    log = log if log.exists() else None
    if data.get("status") == "failed":
        return TargetResult(t.spec, t.kind, "failed", "cached", f"failed before ({data.get('method')})",
                            log=log, errors=list(data.get("errors", [])))
    obj = out / t.output
    rep = _record_path(out, t, REPORT)
    if data.get("status") != "ok" or not obj.exists():
        return None
    if reports and t.kind == "object" and not rep.exists():
        return None
    return TargetResult(t.spec, t.kind, "ok", "cached", f"built before ({data.get('method')})", obj,
                        rep if rep.exists() else None, log)


class _Job:
    """One (commit, toolchain, config) build with the build dir's lock held."""

    def __init__(self, tree: Path, sha: str, tc: Toolchain, version: str, config: Config, lay: Layout,
                 options: BuildOptions, events: Events):
        self.tree, self.sha, self.tc, self.version, self.config = tree, sha, tc, version, config
        self.lay, self.options, self.events = lay, options, events
        self.out = lay.out_dir(sha)
        self.sandbox = sandbox_for(lay, tc, options)
        self.limits = Limits(options.timeout, options.memory)
        self.deadline = time.monotonic() + options.timeout if options.timeout else None
        self.checked_out = False

    # -- helpers
    def run(self, argv: list[str], cwd: Path | None = None) -> Outcome:
        return process.run(argv, cwd or self.lay.build_dir, self.sandbox, self.limits, self.deadline)

    def checkout(self) -> Path:
        if not self.checked_out:
            ensure_worktree(self.tree, self.lay.worktree, self.sha)
            self.checked_out = True
        return self.lay.worktree

    def write_log(self, t: Target, text: str) -> Path:
        return atomic_write(_record_path(self.out, t, LOG), text)

    def finish(self, t: Target, res: TargetResult, persist: bool) -> TargetResult:
        if persist:
            rec = {"target": t.spec, "status": res.status, "method": res.method, "reason": res.reason,
                   "errors": res.errors, "seconds": round(res.seconds, 3), "sha": self.sha,
                   "toolchain": self.tc.name, "compiler_version": self.version, "config": self.config.key}
            atomic_write(_record_path(self.out, t, RECORD), json.dumps(rec, indent=1) + "\n")
        self.events(Event("done", self.tc.name, self.sha, t.spec, res.status, res))
        return res

    def config_text(self) -> str:
        cfg = self.lay.build_dir / ".config"
        return cfg.read_text() if cfg.exists() else ""

    # -- stages
    def ensure_prepared(self) -> None:
        bd = self.lay.build_dir
        if self.lay.worktree.exists() and is_prepared(self.lay.worktree, bd, self.tc, self.config):
            return
        wt = self.checkout()
        if is_prepared(wt, bd, self.tc, self.config):
            return
        prepare(wt, bd, self.tc, self.config, runner=lambda a, c: self.run(a, c), locked=True)
        buildstate.set_synced(bd, self.sha)         # config, generated headers, objtool: this commit's

    def plan(self, t: Target) -> replay.Decision:
        if t.kind != "object":
            return replay.Decision("kbuild", f"{t.kind} targets are built by make")
        bd = self.lay.build_dir
        return replay.decide(self.tree, self.sha, t.spec, cmdfile.read(bd, t.spec), self.lay.worktree,
                             self.config_text(), buildstate.synced(bd), buildstate.object_commit(bd, t.spec),
                             self.options.mode)

    def reuse(self, t: Target, d: replay.Decision) -> TargetResult | None:
        """The earlier commit's kept result, when it is complete; None to compile instead."""
        prev = _cached(self.lay, d.since or "", t, self.version, self.options.reports)
        if prev is None or prev.status != "ok" or prev.path is None:
            return None
        self.events(Event("start", self.tc.name, self.sha, t.spec, "reused"))
        t0 = time.monotonic()
        obj = atomic_copy(prev.path, self.out / t.output)
        rep = atomic_copy(prev.report, _record_path(self.out, t, REPORT)) if prev.report else None
        log = self.write_log(t, f"# {t.spec} at {self.sha}: reused the result of {d.since}: {d.reason}\n")
        return self.finish(t, TargetResult(t.spec, t.kind, "ok", "reused", d.reason, obj, rep, log,
                                           seconds=time.monotonic() - t0), persist=True)

    def replay(self, t: Target, d: replay.Decision) -> TargetResult:
        self.events(Event("start", self.tc.name, self.sha, t.spec, "replay"))
        bd = self.lay.build_dir
        wt = self.checkout()
        rec = cmdfile.read(bd, t.spec)
        scratch = self._scratch(t)
        flags = inline_report.flags(self.tc.family, scratch) if self.options.reports else []
        script = replay.script(rec, flags, wt, nm_for(self.tc))
        out = self.run(["sh", "-c", script])
        log = self.write_log(t, f"# {t.spec} at {self.sha}: replay ({d.reason})\n{script}\n{out.output}")
        if out.status != "ok":
            (bd / t.spec).unlink(missing_ok=True)            # never leave half an object behind
            shutil.rmtree(scratch, ignore_errors=True)
            return self.finish(t, TargetResult(t.spec, t.kind, out.status, "replay", d.reason, log=log,
                                               errors=compiler_errors(out.stderr, out.status),
                                               seconds=out.seconds), persist=out.status == "failed")
        buildstate.set_object_commit(bd, t.spec, self.sha)
        obj = collect(t, bd, self.out)
        rep = self._keep_report(t, scratch) if self.options.reports else None
        return self.finish(t, TargetResult(t.spec, t.kind, "ok", "replay", d.reason, obj, rep, log,
                                           seconds=out.seconds), persist=True)

    def kbuild(self, todo: list[tuple[Target, replay.Decision]]) -> list[TargetResult]:
        bd = self.lay.build_dir
        wt = self.checkout()
        for t, d in todo:
            self.events(Event("start", self.tc.name, self.sha, t.spec, "kbuild"))
            if t.kind == "object":
                (bd / t.spec).unlink(missing_ok=True)        # never take a stale object for this commit's
                buildstate.set_object_commit(bd, t.spec, None)
        buildstate.set_synced(bd, None)
        since = time.time() - 1
        cmd = make_cmd(wt, bd, self.tc, self.config, "-k", *[t.spec for t, _ in todo], jobs=self.options.jobs)
        out = self.run(cmd)
        if out.status == "ok":
            buildstate.set_synced(bd, self.sha)
        elif out.status in ("timeout", "killed"):
            remove_partial(bd, since)
        results = []
        for t, d in todo:
            text = f"# {t.spec} at {self.sha}: make ({d.reason})\n{' '.join(cmd)}\n{out.output}"
            produced = (bd / t.output).exists() and (bd / t.output).stat().st_mtime >= since - 1
            if out.status in ("timeout", "killed"):
                res = TargetResult(t.spec, t.kind, out.status, "kbuild", d.reason, log=self.write_log(t, text),
                                   errors=compiler_errors(out.stderr, out.status), seconds=out.seconds)
                results.append(self.finish(t, res, persist=False))
                continue
            if not produced and not (out.status == "ok" and (bd / t.output).exists()):
                errs = compiler_errors(out.stderr, "failed") or [f"make {t.spec} produced no {t.output}"]
                res = TargetResult(t.spec, t.kind, "failed", "kbuild", d.reason, log=self.write_log(t, text),
                                   errors=errs, seconds=out.seconds)
                results.append(self.finish(t, res, persist=bool(compiler_errors(out.stderr, "failed"))))
                continue
            if t.kind == "object":
                buildstate.set_object_commit(bd, t.spec, self.sha)
            obj = collect(t, bd, self.out)
            rep, rsecs = None, 0.0
            if self.options.reports and t.kind == "object":
                rep, rsecs, rtext = self._report_compile(t)
                text += rtext
            res = TargetResult(t.spec, t.kind, "ok", "kbuild", d.reason, obj, rep, self.write_log(t, text),
                               seconds=out.seconds, report_seconds=rsecs)
            results.append(self.finish(t, res, persist=True))
        return results

    def _scratch(self, t: Target) -> Path:
        s = self.lay.build_dir / ".sizewatch-scratch" / t.spec.replace("/", "_")
        shutil.rmtree(s, ignore_errors=True)
        s.mkdir(parents=True)
        return s

    def _keep_report(self, t: Target, scratch: Path) -> Path | None:
        dest = _record_path(self.out, t, REPORT)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        dest.parent.mkdir(parents=True, exist_ok=True)
        got = inline_report.collect(self.tc.family, scratch, tmp)
        shutil.rmtree(scratch, ignore_errors=True)
        if not got:
            return None
        tmp.replace(dest)
        return dest

    def _report_compile(self, t: Target) -> tuple[Path | None, float, str]:
        """The inline report for an object make just built: its (fresh) command again, with the
        report flags, into a scratch dir (the kept object stays make's own)."""
        rec = cmdfile.read(self.lay.build_dir, t.spec)
        if rec is None or rec.source is None:
            return None, 0.0, ""
        scratch = self._scratch(t)
        script = replay.report_script(rec, inline_report.flags(self.tc.family, scratch), scratch)
        out = self.run(["sh", "-c", script])
        text = f"\n# inline report: one more compile with the report flags\n{script}{out.output}"
        if out.status != "ok":
            shutil.rmtree(scratch, ignore_errors=True)
            return None, out.seconds, text
        return self._keep_report(t, scratch), out.seconds, text


def build_commit(tree: Path, sha: str, toolchain: str, targets: list[str], config: Config = Config(),
                 options: BuildOptions = BuildOptions(), events: Events = lambda e: None) -> CommitBuild:
    """Build ``targets`` at commit ``sha`` of ``tree`` (a git tree) under ``toolchain``."""
    tc, version = toolchain_info(toolchain)
    tlist = [parse(t) for t in targets]
    lay = layout(tree, tc.name, config, options)
    t0 = time.monotonic()
    results: dict[str, TargetResult] = {}
    if options.use_cache:
        for t in tlist:
            hit = _cached(lay, sha, t, version, options.reports)
            if hit is not None:
                results[t.spec] = hit
                events(Event("done", tc.name, sha, t.spec, hit.status, hit))
    todo = [t for t in tlist if t.spec not in results]
    config_text = None
    if todo:
        with file_lock(lay.worktree_lock), file_lock(lay.lock):
            job = _Job(Path(tree), sha, tc, version, config, lay, options, events)
            try:
                job.ensure_prepared()
            except BuildError as e:
                for t in todo:
                    results[t.spec] = job.finish(t, TargetResult(t.spec, t.kind, "failed", "kbuild", "prepare",
                                                                 errors=[str(e)]), persist=False)
                todo = []
            plans = [(t, job.plan(t)) for t in todo]
            make: list[tuple[Target, replay.Decision]] = []
            for t, d in plans:
                if d.method == "reused":
                    got = job.reuse(t, d)
                    if got is not None:
                        results[t.spec] = got
                        continue
                    d = replay.Decision("replay", d.reason + "; no earlier result kept", d.since)
                if d.method == "replay":
                    results[t.spec] = job.replay(t, d)
                else:
                    make.append((t, d))
            if make:
                for r in job.kbuild(make):
                    results[r.target] = r
            config_text = job.config_text() or None
    else:
        cfg = lay.build_dir / ".config"
        config_text = cfg.read_text() if cfg.exists() else None
    return CommitBuild(Path(tree), sha, tc.name, tc.family, version, config, config_text, lay.build_dir,
                       lay.worktree, lay.out_dir(sha), [results[t.spec] for t in tlist],
                       time.monotonic() - t0)


def checkout(tree: Path, sha: str, toolchain: str, config: Config = Config(),
             options: BuildOptions = BuildOptions()) -> Path:
    """The toolchain's worktree at ``sha`` (a source tree for the analyzer's declaration lookups)."""
    lay = layout(tree, toolchain, config, options)
    with file_lock(lay.worktree_lock), file_lock(lay.lock):
        return ensure_worktree(Path(tree), lay.worktree, sha)


_LOC_ERROR = r"^\S+:\d+(?::\d+)?: (?:fatal )?error: |^(?:gcc|clang|cc1)\S*: (?:fatal )?error: "


def compiler_errors(stderr: str, status: str = "failed", limit: int = 20) -> list[str]:
    """The compiler's error lines (``file:line:col: error: ...``), else make's own error lines."""
    lines = [ln.rstrip() for ln in stderr.splitlines()]
    got = [ln for ln in lines if re.search(_LOC_ERROR, ln)]
    if not got:
        got = [ln for ln in lines if "error" in ln.lower() or "memory" in ln.lower() or "failed to map" in ln]
    if status == "timeout":
        got = [ln for ln in lines if ln.startswith("timed out after")] + got
    if status == "killed":
        got = [ln for ln in lines if ln.startswith("over the memory limit")] + \
              [ln for ln in got if not ln.startswith("over the memory limit")]
    return got[:limit]

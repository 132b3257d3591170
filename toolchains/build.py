"""Build one commit of a kernel tree under one toolchain and config: the build API.

``build_commit(tree, sha, "gcc-12", ["mm/page_alloc.o"])`` returns a ``CommitBuild`` with one
``TargetResult`` per target: status (ok | failed | timeout | killed), how it was obtained
(cached | reused | replay | kbuild, and why), the kept object, the compiler's inline report,
the log, the compiler's error lines. Nothing is raised for a commit that does not build:
that is a result. ``toolchains.parallel_builds`` runs many commits × toolchains on top of this.

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
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

from toolchains import buildstate, cmdfile, inline_report, process, replay
from toolchains.buildenv import sandbox_for
from toolchains.diagnostics import compiler_errors, from_compiler
from toolchains.errors import BuildError, InfrastructureError
from toolchains.kbuild import Config, is_prepared, make_cmd, prepare
from toolchains.layout import Layout, atomic_copy, atomic_write
from toolchains.locks import file_lock
from toolchains.process import Limits, Outcome
from toolchains.registry import Toolchain, load
from toolchains.results import BuildOptions, CommitBuild, Event, Events, TargetResult
from toolchains.source import cache_dir
from toolchains.targets import Target, collect, is_linked, parse, remove_partial
from toolchains.git import ensure_worktree

REPORT = ".remarks"          # <target>.remarks: the compiler's inline report
LOG = ".log"                 # <target>.log: what was run and what it printed
RECORD = ".json"             # <target>.json: the result, written last


_versions: dict[str, str] = {}
_versions_lock = threading.Lock()


class ResolvedToolchain(NamedTuple):
    """A toolchain name looked up once: the registry entry for one arch and the exact version of the
    compiler installed here (what every build records and the store keys on). Resolved where a name
    enters (a command, ``ci.pipeline.run.run``, the bot, bisect, a queue worker taking a job) and
    carried from there (``BuildJob.compiler``) down to ``build_commit``."""
    toolchain: Toolchain
    version: str

    @property
    def name(self) -> str:
        return self.toolchain.name


def toolchain_info(name: str, arch: str = "x86_64") -> ResolvedToolchain:
    """``name`` resolved for ``arch``: its registry entry and the exact compiler version (BuildError when
    unknown, not built for ``arch`` or not installed). The one lookup of a toolchain name."""
    tc = load(name, arch)
    key = f"{name}/{arch}"
    with _versions_lock:
        if key not in _versions:
            _versions[key] = tc.version()
        return ResolvedToolchain(tc, _versions[key])


def resolved(toolchain: str | ResolvedToolchain, config: Config) -> ResolvedToolchain:
    """``toolchain`` for ``config``'s arch: a name (the build API's callers: a command, a test, a bench) is
    looked up here; a resolved one is taken as it is, refused in one line when resolved for another arch."""
    if not isinstance(toolchain, ResolvedToolchain):
        return toolchain_info(toolchain, config.arch)
    if toolchain.toolchain.arch != config.arch:
        raise BuildError(f"{toolchain.name} was resolved for {toolchain.toolchain.arch}, "
                         f"the config builds {config.arch}")
    return toolchain


def check_lto(tc: Toolchain, config: Config) -> None:
    """A ThinLTO config is clang's (CONFIG_LTO_CLANG_THIN needs clang, ld.lld and LLVM's
    assembler): gcc is refused in one line."""
    if config.lto and tc.family != "clang":
        raise BuildError(f"--lto {config.lto}: ThinLTO is clang's (CONFIG_LTO_CLANG_THIN): "
                         f"{tc.name} cannot build it; give --toolchains clang-19")


def nm_for(tc: Toolchain) -> str:
    llvm = tc.make_vars.get("LLVM")
    if llvm is None:
        return f"{tc.make_vars.get('CROSS_COMPILE', '')}nm"       # binutils of the target (aarch64-linux-gnu-nm)
    return f"llvm-nm{llvm}" if llvm.startswith("-") else f"{llvm.rstrip('/')}/llvm-nm" if llvm != "1" else "llvm-nm"


def layout(tree: Path, toolchain: str, config: Config, options: BuildOptions) -> Layout:
    """Real paths (the sandbox binds real paths; a linked cache dir must not hide them)."""
    return Layout(Path(options.cache or cache_dir()).resolve(), Path(tree), toolchain, config, options.out_root)


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
    if reports and (t.kind == "object" or (is_linked(t.spec) and lay.config.lto)) and not rep.exists():
        return None                  # built without its inline report (a ThinLTO vmlinux: ld.lld's)
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
        """The worktree at this commit, by its real path (what the sandbox binds, what the
        build records name, even when the cache links its worktrees from elsewhere)."""
        if not self.checked_out:
            ensure_worktree(self.tree, self.lay.worktree, self.sha)
            self.checked_out = True
        return self.lay.worktree.resolve()

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
        return replay.decide(self.tree, self.sha, t.spec, cmdfile.read(bd, t.spec), self.lay.worktree.resolve(),
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
                                               seconds=out.seconds),
                               persist=out.status == "failed" and from_compiler(out.stderr))
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
        if self.config.lto:                                  # ld.lld's remarks: this link's only
            shutil.rmtree(bd / inline_report.LTO_DIR, ignore_errors=True)
            (bd / inline_report.LTO_DIR).mkdir()
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
                results.append(self.finish(t, res, persist=from_compiler(out.stderr)))
                continue
            if t.kind == "object":
                buildstate.set_object_commit(bd, t.spec, self.sha)
            obj = collect(t, bd, self.out)
            rep, rsecs = None, 0.0
            if self.options.reports and t.kind == "object":
                rep, rsecs, rtext = self._report_compile(t)
                text += rtext
            elif self.options.reports and is_linked(t.spec) and self.config.lto:
                rep = self._keep_lto_report(t)
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

    def _keep_lto_report(self, t: Target) -> Path:
        """ld.lld's inline remarks of the allocator unit's ThinLTO backend, kept as the vmlinux's
        report (empty when the link wrote none: the build is still complete)."""
        dest = _record_path(self.out, t, REPORT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        if not inline_report.collect_lto(self.lay.build_dir, tmp):
            tmp.write_text("")
        tmp.replace(dest)
        shutil.rmtree(self.lay.build_dir / inline_report.LTO_DIR, ignore_errors=True)
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


def build_commit(tree: Path, sha: str, toolchain: str | ResolvedToolchain, targets: list[str],
                 config: Config = Config(), options: BuildOptions = BuildOptions(),
                 events: Events = lambda e: None) -> CommitBuild:
    """Build ``targets`` at commit ``sha`` of ``tree`` (a git tree) under ``toolchain`` (a name, looked up
    here, or as resolved where the name entered)."""
    tc, version = resolved(toolchain, config)
    check_lto(tc, config)
    tlist = [parse(t) for t in targets]
    lay = layout(tree, tc.name, config, options)
    t0 = time.monotonic()
    results: dict[str, TargetResult] = {}

    def take_cached(todo: list[Target]) -> list[Target]:
        if not options.use_cache:
            return todo
        for t in todo:
            hit = _cached(lay, sha, t, version, options.reports)
            if hit is not None:
                results[t.spec] = hit
                events(Event("done", tc.name, sha, t.spec, hit.status, hit))
        return [t for t in todo if t.spec not in results]

    todo = take_cached(tlist)
    config_text = None
    if todo:
        with file_lock(lay.worktree_lock), file_lock(lay.lock):
            todo = take_cached(todo)         # another process may have built them while we waited
            job = _Job(Path(tree), sha, tc, version, config, lay, options, events)
            try:
                job.ensure_prepared()
            except InfrastructureError:
                raise                        # not a result of this commit: nothing is kept
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
    """The toolchain's worktree at ``sha`` (a source tree for the analyzer's declaration lookups);
    the next build of that toolchain may move it: ``checked_out`` holds it."""
    with checked_out(tree, sha, toolchain, config, options) as path:
        return path


@contextmanager
def checked_out(tree: Path, sha: str, toolchain: str, config: Config = Config(),
                options: BuildOptions = BuildOptions()) -> Iterator[Path]:
    """The toolchain's worktree at ``sha``, held there for the block (its builds wait)."""
    lay = layout(tree, toolchain, config, options)
    with file_lock(lay.worktree_lock), file_lock(lay.lock):
        yield ensure_worktree(Path(tree), lay.worktree, sha)

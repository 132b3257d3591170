"""``sizewatch bisect``: the first commit of ``A..B`` at which a function's size or inlining changed.

"When did this function stop being inlined?" is answered the way ``git bisect`` answers
"when did this break?", over git's first-parent order of the range, with two differences
that make it cheap: every (commit, toolchain) the store already holds is read first and
narrows the search before anything is built, and the midpoints that are built go through
the pipeline (``ci.pipeline.run``), so they are stored and the next question about the same
range builds nothing. The condition is judged against the function at ``A`` (the known-good
end), so ``--grew-by 64`` means "at least 64 bytes more than at A". Like ``git bisect`` it
assumes the condition, once it holds, keeps holding; a commit whose build fails is skipped
(``git bisect skip``) and, when the answer hinges on skipped commits, they are all named.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Callable

from analyzer.align import placement
from analyzer.clones import parse
from analyzer.errors import InputError
from analyzer.formats import bloat_text
from ci.pipeline import analysis
from ci.pipeline.plan import RunPlan, plan_range
from ci.pipeline.run import build_all, compare_all
from ci.reports.model import comparison_tables
from db.models import Commit
from db.store import Store
from toolchains.build import ResolvedToolchain, resolved
from toolchains.git import split_range
from toolchains.kbuild import Config
from toolchains.source import Tree, open_tree
from toolchains.targets import DEFAULT_TARGETS

CONDITIONS = ("grew_by", "outlined", "inlined", "crossed_line")


@dataclass(frozen=True)
class Condition:
    """What is searched for, judged against the function at the range's base."""
    kind: str                       # one of CONDITIONS
    bytes: int = 0                  # grew_by's threshold

    def describe(self) -> str:
        return {"grew_by": f"grew by at least {self.bytes} bytes",
                "outlined": "has an out-of-line copy",
                "inlined": "is inlined with no out-of-line copy",
                "crossed_line": "spans more 64-byte cache lines"}[self.kind]


@dataclass
class FunctionState:
    """The function in one stored build (absent from the build: size 0, no facts)."""
    sha: str
    build_id: int | None
    status: str                     # the build's status; "ok" when the function could be judged
    size: int = 0                   # text bytes of the symbol and its clones (bloat-o-meter's view)
    declared: str | None = None     # inline facts from DWARF; None when the build holds none
    out_of_line: bool | None = None
    inlined_count: int | None = None
    source: str = "stored"          # stored | built

    @property
    def cache_lines(self) -> int:
        return placement(self.size).lines

    def to_dict(self) -> dict:
        return {**asdict(self), "cache_lines": self.cache_lines}


def holds(cond: Condition, base: FunctionState, st: FunctionState) -> bool:
    """Whether ``cond`` holds at ``st``, given the function at the range's base."""
    if cond.kind == "grew_by":
        return st.size - base.size >= cond.bytes
    if cond.kind == "outlined":
        return st.size > 0
    if cond.kind == "inlined":
        return st.size == 0 and (st.inlined_count or 0) > 0
    if cond.kind == "crossed_line":
        return st.cache_lines > base.cache_lines
    raise InputError(f"unknown condition {cond.kind!r} (one of {', '.join(CONDITIONS)})")


@dataclass
class Step:
    """One commit the search looked at, in the order it looked."""
    index: int                      # position in the range (0 = the base A)
    sha: str
    subject: str
    holds: bool | None              # None: skipped (its build failed)
    state: FunctionState

    def to_dict(self) -> dict:
        return {"index": self.index, "sha": self.sha, "subject": self.subject, "holds": self.holds,
                "state": self.state.to_dict()}


@dataclass
class BisectResult:
    function: str
    toolchain: str
    toolchain_version: str
    target: str
    condition: Condition
    range_spec: str
    commits: int                    # commits in the range after A
    first: Commit | None            # the first commit where the condition holds (None: undecided)
    parent: Commit | None           # its first parent (the last commit where it does not)
    candidates: list[Commit] = field(default_factory=list)   # when skipped builds leave several
    before: FunctionState | None = None
    after: FunctionState | None = None
    bloat_rows: str = ""            # bloat-o-meter's header and the function's rows, parent -> first
    reasons: list[str] = field(default_factory=list)         # the compiler's inline remarks there
    steps: list[Step] = field(default_factory=list)
    built: int = 0                  # builds this search made (the rest came from the store)

    def to_dict(self) -> dict:
        def c(x: Commit | None) -> dict | None:
            return None if x is None else {"sha": x.sha, "subject": x.subject, "author": x.author, "date": x.date}
        return {"function": self.function, "toolchain": self.toolchain,
                "toolchain_version": self.toolchain_version, "target": self.target,
                "condition": asdict(self.condition), "range": self.range_spec, "commits": self.commits,
                "first": c(self.first), "parent": c(self.parent),
                "candidates": [c(x) for x in self.candidates],
                "before": self.before.to_dict() if self.before else None,
                "after": self.after.to_dict() if self.after else None,
                "bloat_rows": self.bloat_rows, "reasons": self.reasons,
                "steps": [s.to_dict() for s in self.steps], "built": self.built}


class _Prober:
    """The function's state at commits of one range under one toolchain: stored first, else built."""

    def __init__(self, store: Store, tree: Tree, plan: RunPlan, function: str, compiler: ResolvedToolchain,
                 target: str, config: Config | None, progress: Callable[[str], None]):
        self.store, self.tree, self.plan, self.function = store, tree, plan, function
        self.compiler, self.target, self.config, self.progress = compiler, target, config, progress
        self.toolchain, self.version = compiler.name, compiler.version
        self.key = (config or Config()).key
        self.built = 0

    def stored(self, commit: Commit) -> FunctionState | None:
        """The state from the store, or None when the build is missing or analyzed by an older sizewatch."""
        b = self.store.find_build(self.tree.name, commit.sha, self.toolchain, self.key, self.target, self.version)
        if not self.store.build_done(b, analysis.ANALYSIS_VERSION):
            return None
        if b.status != "ok":
            return FunctionState(commit.sha, b.id, b.status)
        return self._state(commit.sha, b.id)

    def _state(self, sha: str, build_id: int) -> FunctionState:
        size = sum(s.size for s in self.store.symbols_for(build_id)
                   if s.letter in "tTwW" and parse(s.name).base == self.function)
        facts = next((f for f in self.store.functions_for(build_id) if f.name == self.function), None)
        if facts is None:
            return FunctionState(sha, build_id, "ok", size)
        return FunctionState(sha, build_id, "ok", size, facts.declared, facts.out_of_line, facts.inlined_count)

    def get(self, commit: Commit) -> FunctionState:
        """Stored, else built (and stored) through the pipeline."""
        st = self.stored(commit)
        if st is not None:
            return st
        one = RunPlan(self.tree, [commit], [commit])
        stats = build_all(self.store, one, [self.compiler], [self.target], self.config, self.progress)
        self.built += stats.built + stats.reanalyzed
        st = self.stored(commit)
        if st is None:
            raise InputError(f"{commit.sha[:12]}: no {self.toolchain} build of {self.target} after building it")
        st.source = "built"
        return st


def bisect(store: Store, tree_spec: str, function: str, range_spec: str, toolchain: str | ResolvedToolchain,
           cond: Condition,
           target: str = DEFAULT_TARGETS[0], config: Config | None = None,
           progress: Callable[[str], None] = lambda s: None) -> BisectResult:
    """The first commit of ``range_spec`` (A..B, first-parent) at which ``cond`` holds for ``function``."""
    if cond.kind not in CONDITIONS:
        raise InputError(f"unknown condition {cond.kind!r} (one of {', '.join(CONDITIONS)})")
    if cond.kind == "grew_by" and cond.bytes <= 0:
        raise InputError("--grew-by takes a positive number of bytes")
    if split_range(range_spec) is None:
        raise InputError(f"{range_spec}: give a range A..B (A: a commit where the condition does not hold)")
    # a name looked up once (a resolved one taken), then carried: an unknown or missing compiler fails
    # before any git work
    compiler = resolved(toolchain, config or Config())
    toolchain = compiler.name
    tree = open_tree(tree_spec)
    plan = plan_range(store, tree, range_spec)
    chain = plan.to_build                   # A, then B's first-parent commits after A
    probe = _Prober(store, tree, plan, function, compiler, target, config, progress)
    res = BisectResult(function, toolchain, probe.version, target, cond, range_spec, len(chain) - 1, None, None)
    known: dict[int, FunctionState] = {0: probe.get(chain[0])}
    base = known[0]

    def look(i: int) -> FunctionState:
        if i not in known:
            known[i] = probe.get(chain[i])
        st = known[i]
        res.steps.append(Step(i, chain[i].sha, chain[i].subject, verdict(st), st))
        return st

    def verdict(st: FunctionState) -> bool | None:
        return holds(cond, base, st) if st.status == "ok" else None

    # the ends first: A must not satisfy the condition, B must
    look(0)
    if base.status != "ok":
        raise InputError(f"{chain[0].sha[:12]} (A) does not build under {toolchain}: cannot judge the condition there")
    res.steps[-1].holds = False
    if holds(cond, base, base):
        raise InputError(f"{function} already {cond.describe()} at {chain[0].sha[:12]} (A)")
    # what the store holds inside the range narrows the search before anything is built
    for i in range(1, len(chain)):
        st = probe.stored(chain[i])
        if st is not None:
            known[i] = st
    tip = look(len(chain) - 1)
    if tip.status != "ok":
        raise InputError(f"{chain[-1].sha[:12]} (B) does not build under {toolchain}: cannot judge the condition there")
    if not holds(cond, base, tip):
        raise InputError(f"{function} never {cond.describe()} in {range_spec} under {toolchain} "
                         f"(at B: {tip.size} bytes, {_inline_status(tip)})")
    good, bad = 0, len(chain) - 1
    stored_verdicts = {i: verdict(st) for i, st in known.items() if i not in (0, len(chain) - 1)}
    first_true = min((i for i, v in stored_verdicts.items() if v), default=bad)
    bad = first_true
    good = max((i for i, v in stored_verdicts.items() if v is False and i < bad), default=0)
    skipped: set[int] = {i for i, v in stored_verdicts.items() if v is None and good < i < bad}
    while True:
        open_ = [i for i in range(good + 1, bad) if i not in skipped]
        if not open_:
            break
        mid = (good + bad) // 2
        i = min(open_, key=lambda j: (abs(j - mid), j))     # the middle, or its nearest unskipped neighbour
        v = verdict(look(i))
        progress(f"bisect: {chain[i].sha[:12]} {'holds' if v else 'skipped (build failed)' if v is None else 'does not hold'}"
                 f" ({len(open_) - 1} commits left to judge)")
        if v is None:
            skipped.add(i)
        elif v:
            bad = i
        else:
            good = i
    res.built = probe.built
    if any(good < i < bad for i in skipped):
        res.candidates = chain[good + 1:bad + 1]
        return res
    res.first, res.parent = chain[bad], chain[good]
    res.before, res.after = known[good], known[bad]
    _explain(store, plan, res, probe, config)
    return res


def _explain(store: Store, plan: RunPlan, res: BisectResult, probe: _Prober, config: Config | None) -> None:
    """bloat-o-meter's rows for the function and the compiler's remarks at the first commit."""
    pair = RunPlan(plan.tree, [res.first], [res.parent, res.first])
    compare_all(store, pair, [probe.compiler], [res.target], config)
    before, after = res.before, res.after
    if before.build_id is not None and after.build_id is not None:
        tables = comparison_tables(store, before.build_id, after.build_id)
        if tables:
            t = tables[0]
            mine = [r for r in t.rows if parse(r.name).base == res.function]
            if mine:
                text = bloat_text([type(t)(t.title, t.add, t.remove, t.grow, t.shrink, t.up, t.down, mine,
                                           t.old_total, t.new_total)]).splitlines()
                res.bloat_rows = "\n".join(text[1:-1])          # the header and the rows, not the totals
    if after.build_id is not None:
        seen = set()
        for r in store.remarks_for(after.build_id):
            if r.callee == res.function or (r.callee and parse(r.callee).base == res.function):
                where = re.sub(r"^.*/worktrees/[^/]+/", "", r.location or "")
                line = (f"{'inlined' if r.passed else 'not inlined'} into {r.caller or '?'}: {r.reason}"
                        + (f" ({where})" if where else ""))
                if line not in seen:
                    seen.add(line)
                    res.reasons.append(line)


def _inline_status(st: FunctionState) -> str:
    if st.declared is None:
        return "out of line" if st.size else "no facts (not in the build)"
    where = "out of line" if st.size else "inlined only"
    n = f", inlined {st.inlined_count}x" if st.inlined_count else ""
    return f"{st.declared}: {where}{n}"


def text(res: BisectResult) -> str:
    """What ``sizewatch bisect`` prints."""
    out = []
    if res.first is None:
        failed = {s.sha for s in res.steps if s.holds is None}
        out.append(f"{res.function} {res.condition.describe()} first at one of these commits "
                   f"(skipped: a {res.toolchain} build that failed cannot be judged):")
        out += [f"  {c.sha[:12]} {c.subject}" + ("  [skipped: does not build]" if c.sha in failed else "")
                for c in res.candidates]
    else:
        out.append(f"first commit where {res.function} {res.condition.describe()} "
                   f"({res.toolchain}: {res.toolchain_version}; {res.target}):")
        out.append(f"{res.first.sha} {res.first.subject}")
        out.append(f"  parent {res.parent.sha[:12]}: {res.before.size} bytes, {_inline_status(res.before)}")
        out.append(f"  here   {res.first.sha[:12]}: {res.after.size} bytes, {_inline_status(res.after)}")
        out.append("")
        out.append(res.bloat_rows or f"(no bloat-o-meter row: the symbols of {res.function} did not change)")
        out.append("")
        if res.reasons:
            out.append(f"{res.toolchain} on {res.function} at this commit:")
            out += [f"  {r}" for r in res.reasons]
        else:
            out.append(f"{res.toolchain} reported no inlining decision about {res.function} at this commit")
    judged = len(res.steps)
    out.append("")
    out.append(f"{res.commits} commits in {res.range_spec}; {judged} judged, {res.built} built, "
               f"the rest from the store")
    return "\n".join(out) + "\n"

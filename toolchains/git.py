"""Everything sizewatch asks of git: revisions, first-parent ranges, worktrees, and ``git am``.

Builds never touch a user's checkout: commits are checked out into worktrees of the
tree, and a series is applied patch by patch in a scratch worktree, so a patch that does
not apply is known by position (the ones before it still get built). Identity and dates
are pinned (``GIT_ENV``, ``--committer-date-is-author-date``), so the same series on the
same base always yields the same commit shas and a second run finds its results again.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.locks import file_lock
from toolchains.series import MboxSeries, read_mbox

# Fixed identity and date so every machine makes the same base commit sha.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "sizewatch",
    "GIT_AUTHOR_EMAIL": "sizewatch@localhost",
    "GIT_COMMITTER_NAME": "sizewatch",
    "GIT_COMMITTER_EMAIL": "sizewatch@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}
# git am keeps the patch's author and date; the committer is sizewatch, at the author's date
_AM_ENV = {"GIT_COMMITTER_NAME": "sizewatch", "GIT_COMMITTER_EMAIL": "sizewatch@localhost"}
# the scratch worktree's lock held by this thread (am_locked): every git started under it inherits the
# locked file, so the lock outlives a killed sizewatch until the last of its git children is gone too
_scratch_held = threading.local()


def git(tree: Path, *args: str, check: bool = True, env: dict | None = None,
        input: str | None = None) -> str:
    """Run git in ``tree``; a failure is a BuildError with git's last line."""
    full_env = {**os.environ, **GIT_ENV, **(env or {})}
    proc = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True,
                          env=full_env, input=input, pass_fds=getattr(_scratch_held, "fds", ()))
    if check and proc.returncode != 0:
        msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise BuildError(f"git {args[0]} failed in {tree}: {msg[-1] if msg else proc.returncode}")
    return proc.stdout


def resolve(tree: Path, rev: str) -> str:
    """The full sha of a commit-ish, or a BuildError naming it."""
    out = git(tree, "rev-parse", "--verify", "--quiet", rev + "^{commit}", check=False).strip()
    if not out:
        raise BuildError(f"{tree}: unknown revision {rev!r}")
    return out


def has_commit(tree: Path, rev: str) -> str | None:
    """The full sha when the tree has ``rev``, else None."""
    return git(tree, "rev-parse", "--verify", "--quiet", rev + "^{commit}", check=False).strip() or None


@dataclass(frozen=True)
class CommitRange:
    """``A..B`` read once: ``base`` is A (None for a single revision), ``commits`` B's first-parent
    commits after A, oldest first. A report compares ``commits`` with their parents; a build of the
    range builds A as well (``with_base``), since the first commit is compared with it."""
    base: str | None
    commits: list[str]

    @property
    def with_base(self) -> list[str]:
        return ([self.base] if self.base else []) + self.commits


def split_range(spec: str) -> tuple[str, str] | None:
    """``A..B`` as (A, B), an empty side meaning HEAD; None when ``spec`` is no range. Dots that do
    not make one two-sided range (``A..B..C``, ``A...B``, ``X,Y..Z``) are a one-line BuildError saying
    what a range is (git would print its usage, or "unknown revision '.B'"). Reads no tree: commands
    call it before any work."""
    spec = spec.strip()
    if ".." not in spec:
        return None
    a, _, b = spec.partition("..")
    if ".." in b or b.startswith(".") or "," in spec:
        raise BuildError(f"bad range {spec[:80]!r}: give BASE..HEAD (two revisions)")
    return a or "HEAD", b or "HEAD"


def commit_range(tree: Path, spec: str) -> CommitRange:
    """``A..B`` (first-parent; empty sides mean HEAD) or a single revision."""
    spec = spec.strip()
    if not spec:
        raise BuildError("no commits given")
    ends = split_range(spec)
    if ends is None:
        return CommitRange(None, [resolve(tree, spec)])
    a_sha, b_sha = resolve(tree, ends[0]), resolve(tree, ends[1])
    shas = git(tree, "rev-list", "--reverse", "--first-parent", f"{a_sha}..{b_sha}").split()
    if not shas:
        raise BuildError(f"{spec}: no commits in that range")
    return CommitRange(a_sha, shas)


def commit_list(tree: Path, spec: str) -> list[str]:
    """What ``sizewatch build --commits`` takes: ``A..B`` (A and every first-parent commit after
    it), ``X,Y,Z`` (those, in that order, once each) or ``X``."""
    if ".." in spec:
        return commit_range(tree, spec).with_base
    out: list[str] = []
    for rev in spec.split(","):
        if rev.strip():
            sha = resolve(tree, rev.strip())
            if sha not in out:
                out.append(sha)
    if not out:
        raise BuildError("no commits given")
    return out


def subjects(tree: Path, shas: list[str]) -> dict[str, str]:
    """Each commit's subject line."""
    return {sha: git(tree, "log", "-1", "--format=%s", sha).strip() for sha in shas}


def ensure_worktree(tree: Path, path: Path, commit: str) -> Path:
    """A detached worktree of ``tree`` at ``path`` with ``commit`` checked out.

    Checking out a new commit only rewrites changed files, so kbuild's
    mtime-based rebuild touches only what the commit changed.
    """
    if not (path / ".git").exists():
        if path.exists():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # one prune/add at a time per repository: a prune removes an empty .git/worktrees while
        # another process's add is about to create its entry there ("could not create directory")
        gitdir = Path(tree) / ".git"
        lock = gitdir / "sizewatch-worktree.lock" if gitdir.is_dir() else Path(tree).parent / f".{Path(tree).name}.worktree.lock"
        with file_lock(lock):
            git(tree, "worktree", "prune")
            git(tree, "worktree", "add", "-q", "--detach", str(path), commit)
        return path
    if git(path, "rev-parse", "HEAD").strip() != resolve(tree, commit):
        for attempt in range(20):
            try:
                git(path, "checkout", "-q", "--detach", "--force", commit)
                break
            except BuildError as e:            # a git of another process holds index.lock: wait for it
                if "index.lock" not in str(e) and "remove the file manually" not in str(e) or attempt == 19:
                    raise
                time.sleep(0.5)
    return path


# --- series: git am, patch by patch -------------------------------------------------------------

@dataclass
class Applied:
    """One patch of a series after ``git am``."""
    position: int
    subject: str
    message_id: str
    author: str
    commit: str | None               # None when it did not apply (or an earlier one did not)
    status: str                      # applied | failed | skipped
    error: str = ""


def pick_base(tree: Path, series: MboxSeries, base: str | None) -> str:
    """The series' base-commit when the tree has it, else the user's ``--base``."""
    if series.base_commit:
        got = has_commit(tree, series.base_commit)
        if got:
            return got
    if base:
        return resolve(tree, base)
    if series.base_commit:
        raise BuildError(f"{series.name}: base-commit {series.base_commit[:12]} is not in {tree}; give --base")
    raise BuildError(f"{series.name}: no base-commit: trailer; give --base")


def clear_stale_locks(wt: Path) -> list[Path]:
    """Remove the lock files a git killed mid-command left in a scratch worktree's own git dir
    (``index.lock``, ``HEAD.lock``, ...): git cannot remove them after a SIGKILL, and every later git
    command there fails ("remove the file manually to continue"), so a bot killed during ``git am``
    stopped testing series for good (issue 28's kill campaign). Called under ``am_locked``'s lock,
    which every git started under it inherits: holding it, no git of any sizewatch process is
    running there, so a lock file found is stale. Returns what was removed."""
    if not (wt / ".git").exists():
        return []
    gitdir = Path(git(wt, "rev-parse", "--absolute-git-dir").strip())
    removed = sorted(gitdir.glob("*.lock"))
    for lock in removed:
        lock.unlink(missing_ok=True)
    return removed


def am(tree: Path, series: MboxSeries, base_sha: str, scratch: Path) -> list[Applied]:
    """``git am`` each patch in a scratch worktree at ``base_sha``; stop at the first that fails
    (the rest are ``skipped``). The caller holds a lock on ``scratch``; what a killed git left
    there (lock files, an ``am`` in progress) is cleared first."""
    clear_stale_locks(scratch)
    wt = ensure_worktree(tree, scratch, base_sha)
    git(wt, "am", "--abort", check=False)
    git(wt, "checkout", "-q", "--detach", "--force", base_sha)
    out: list[Applied] = []
    failed = False
    for p in series.patches:
        if failed:
            out.append(Applied(p.position, p.subject, p.message_id, p.author, None, "skipped",
                               "an earlier patch did not apply"))
            continue
        with tempfile.NamedTemporaryFile(suffix=".mbox") as f:
            f.write(p.raw)
            f.flush()
            git(wt, "am", "-q", "--committer-date-is-author-date", f.name, check=False, env=_AM_ENV)
        rebase_apply = Path(wt, git(wt, "rev-parse", "--git-path", "rebase-apply").strip())
        if rebase_apply.exists():
            err = _am_error(wt)
            git(wt, "am", "--abort", check=False)
            out.append(Applied(p.position, p.subject, p.message_id, p.author, None, "failed", err))
            failed = True
            continue
        out.append(Applied(p.position, p.subject, p.message_id, p.author,
                           git(wt, "rev-parse", "HEAD").strip(), "applied"))
    return out


def am_locked(tree: Path, series: MboxSeries, base_sha: str, scratch: Path) -> list[Applied]:
    """``am`` holding the scratch worktree's lock: one git am at a time per scratch tree."""
    path = scratch.parent / f".{scratch.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        _scratch_held.fds = (f.fileno(),)   # git children hold it too (a kill -9 of this process alone)
        try:
            return am(tree, series, base_sha, scratch)
        finally:
            _scratch_held.fds = ()
            fcntl.flock(f, fcntl.LOCK_UN)


def series_commits(tree: Path, mbox: Path, base: str | None, scratch: Path) -> list[str]:
    """What ``sizewatch build --series`` builds: the series' base, then one commit per patch.
    Every patch must apply (a BuildError names the first that does not)."""
    series = read_mbox(mbox)
    base_sha = pick_base(tree, series, base)
    applied = am_locked(tree, series, base_sha, scratch)
    bad = next((a for a in applied if a.status == "failed"), None)
    if bad is not None:
        raise BuildError(f"{mbox.name}: patch {bad.subject!r} does not apply on {base_sha[:12]}: {bad.error}")
    return [base_sha, *(a.commit for a in applied if a.commit)]


def _am_error(wt: Path) -> str:
    """Why git am stopped: re-run its apply step with --check for the first failing hunk."""
    patch = Path(wt, git(wt, "rev-parse", "--git-path", "rebase-apply/patch").strip())
    if patch.exists():
        proc = subprocess.run(["git", "-C", str(wt), "apply", "--check", str(patch)], capture_output=True, text=True)
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        if lines:
            return "; ".join(ln[len("error: "):] for ln in lines[:2])
    return "git am failed"

"""Git worktrees for builds and ``git am`` of mbox series, never touching the user's checkout."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.source import git


def ensure_worktree(tree: Path, path: Path, commit: str) -> Path:
    """A detached worktree of ``tree`` at ``path`` with ``commit`` checked out.

    Checking out a new commit only rewrites changed files, so kbuild's
    mtime-based rebuild touches only what the commit changed.
    """
    if not (path / ".git").exists():
        if path.exists():
            shutil.rmtree(path)
        git(tree, "worktree", "prune")
        path.parent.mkdir(parents=True, exist_ok=True)
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


def resolve(tree: Path, rev: str) -> str:
    out = git(tree, "rev-parse", "--verify", "--quiet", rev + "^{commit}", check=False).strip()
    if not out:
        raise BuildError(f"{tree}: unknown revision {rev!r}")
    return out


def mbox_base(mbox: Path) -> str | None:
    """The ``base-commit:`` trailer git format-patch --base writes, if any."""
    for line in mbox.read_text(errors="replace").splitlines():
        if line.startswith("base-commit: "):
            return line.split()[1]
    return None


def apply_series(tree: Path, mbox: Path, base: str | None, scratch: Path) -> list[str]:
    """Apply an mbox with ``git am`` on its base; return the new commit shas, first patch first.

    Committer identity and dates are pinned, so the same series on the same
    base always gives the same shas (and stored results are found again).
    """
    base = base or mbox_base(mbox)
    if base is None:
        raise BuildError(f"{mbox}: no base-commit: trailer; give a base commit")
    base_sha = resolve(tree, base)
    wt = ensure_worktree(tree, scratch, base_sha)
    git(wt, "am", "--abort", check=False)
    git(wt, "checkout", "-q", "--detach", "--force", base_sha)
    git(wt, "am", "-q", "--committer-date-is-author-date", str(mbox.resolve()), check=False,
        env={"GIT_COMMITTER_NAME": "sizewatch", "GIT_COMMITTER_EMAIL": "sizewatch@localhost"})
    rebase_apply = Path(wt, git(wt, "rev-parse", "--git-path", "rebase-apply").strip())
    if rebase_apply.exists():
        subject = _failing_subject(wt)
        git(wt, "am", "--abort", check=False)
        raise BuildError(f"{mbox.name}: patch {subject!r} does not apply on {base_sha[:12]}")
    shas = git(wt, "rev-list", "--reverse", f"{base_sha}..HEAD").split()
    if not shas:
        raise BuildError(f"{mbox}: no patches found")
    return shas


def _failing_subject(wt: Path) -> str:
    msg = git(wt, "am", "--show-current-patch=raw", check=False)
    for line in msg.splitlines():
        if line.startswith("Subject:"):
            return line[len("Subject:"):].strip()
    return "?"

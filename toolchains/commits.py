"""Which commits to build: one revision, a list, a range ``A..B`` or a patch series (mbox)."""
from __future__ import annotations

from pathlib import Path

from toolchains.errors import BuildError
from toolchains.locks import file_lock
from toolchains.source import git
from toolchains.worktree import apply_series, resolve


def from_spec(tree: Path, spec: str) -> list[str]:
    """``A..B``: A, then B's first-parent commits after A, oldest first (A is what the first is
    compared with); ``X,Y,Z``: those, in that order; ``X``: X alone."""
    spec = spec.strip()
    if not spec:
        raise BuildError("no commits given")
    if ".." in spec:
        a, b = spec.split("..", 1)
        a_sha, b_sha = resolve(tree, a or "HEAD"), resolve(tree, b or "HEAD")
        shas = git(tree, "rev-list", "--reverse", "--first-parent", f"{a_sha}..{b_sha}").split()
        if not shas:
            raise BuildError(f"{spec}: no commits in that range")
        return [a_sha, *shas]
    out: list[str] = []
    for rev in spec.split(","):
        if rev.strip():
            sha = resolve(tree, rev.strip())
            if sha not in out:
                out.append(sha)
    return out


def from_series(tree: Path, mbox: Path, base: str | None, scratch: Path) -> list[str]:
    """The series' base commit, then one commit per patch (applied with ``git am`` in ``scratch``)."""
    if not mbox.is_file():
        raise BuildError(f"{mbox}: no such mbox file")
    with file_lock(scratch.parent / f".{scratch.name}.lock"):       # one git am at a time in scratch
        shas = apply_series(tree, mbox, base, scratch)
    return [git(tree, "rev-parse", f"{shas[0]}^").strip(), *shas]


def subjects(tree: Path, shas: list[str]) -> dict[str, str]:
    out = {}
    for sha in shas:
        out[sha] = git(tree, "log", "-1", "--format=%s", sha).strip()
    return out

"""The worked example: build mm/page_alloc.o at each patch of toolchains/examples/ and diff them.

``sizewatch example`` shows these tables without the store; the test fixtures use the
same objects (built once, kept under the cache like every build).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from toolchains.build import BuildOptions, build_commit
from toolchains.errors import BuildError
from toolchains.git import series_commits as apply_series, subjects
from toolchains.kbuild import Config
from toolchains.source import cache_dir, ensure_source

EXAMPLE_MBOX = Path(__file__).resolve().parent / "examples" / "rmqueue-always-inline.mbox"


@dataclass(frozen=True)
class BuiltCommit:
    commit: str
    subject: str
    object_path: Path
    report_path: Path | None = None


def series_commits(mbox: Path = EXAMPLE_MBOX, version: str = "6.1", cache: Path | None = None) -> tuple[Path, list[str]]:
    """The tree and the series' commits: its base, then one per patch (applied once, same shas every time)."""
    cache = cache or cache_dir()
    src = ensure_source(version, cache)
    return src.path, apply_series(src.path, mbox, None, cache / "worktrees" / "am")


def build_series(toolchain: str = "gcc-12", target: str = "mm/page_alloc.o",
                 mbox: Path = EXAMPLE_MBOX, version: str = "6.1", cache: Path | None = None,
                 options: BuildOptions | None = None) -> list[BuiltCommit]:
    """Build ``target`` at the series' base and after each patch (kept per commit in the cache)."""
    options = options or BuildOptions(cache=cache)
    tree, shas = series_commits(mbox, version, cache)
    names = subjects(tree, shas)
    out: list[BuiltCommit] = []
    for sha in shas:
        b = build_commit(tree, sha, toolchain, [target], Config(), options)
        r = b.targets[0]
        if not r.ok or r.path is None:
            raise BuildError(f"{toolchain} {sha[:12]} {target}: {r.status}: {(r.errors or ['no object'])[0]}")
        out.append(BuiltCommit(sha, names[sha], r.path, r.report))
    return out

"""``sizewatch bisect`` on a 16-commit first-parent range of the real linux-6.1 tree: the two example
patches with unrelated commits (Documentation/ edits) around them, gcc-12, mm/page_alloc.o.

Each answer is checked against a brute-force scan of the same stored results after every commit of
the range has been built (``sizewatch run A..B``), and its bloat-o-meter row against the kernel's own
scripts/bloat-o-meter on the two objects. The first search on an empty store must build only the
ends and the midpoints it needs; the second, on the full store, nothing.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from buildtrees import GIT_ENV
from conftest import sizewatch_cmd

pytestmark = pytest.mark.kernel

TC = "gcc-12"
TARGET = "mm/page_alloc.o"
REF = "refs/sizewatch-tests/bisect-range"      # keeps the commits from git gc in the shared tree
DOC = "Documentation/mm/balance.rst"


def run_cli(*args, db: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*sizewatch_cmd(), *map(str, args), "--db", str(db)], capture_output=True, text=True,
                          timeout=timeout)


def _commit(tree: Path, parent: str, blobs: dict[str, str], message: str) -> str:
    """A commit on ``parent`` with paths set to existing blob shas (git plumbing, no checkout)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **GIT_ENV, "GIT_INDEX_FILE": f"{tmp}/index"}

        def g(*args: str, stdin: str | None = None) -> str:
            return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True,
                                  env=env, input=stdin).stdout.strip()
        g("read-tree", parent)
        for path, blob in blobs.items():
            g("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
        return g("commit-tree", g("write-tree"), "-p", parent, "-m", message)


def _blob(tree: Path, text: str) -> str:
    return subprocess.run(["git", "-C", str(tree), "hash-object", "-w", "--stdin"], input=text, text=True,
                          check=True, capture_output=True).stdout.strip()


@pytest.fixture(scope="module")
def bisect_range():
    """(tree, [A, c1..c16]): u1-u4, patch 1, u5-u10, patch 2, u11-u14 on the example series' base.
    The same shas every run (pinned names and dates), so the build cache serves a second run."""
    from toolchains.example import series_commits
    tree, (base, p1, p2) = series_commits()

    def show(rev: str) -> str:
        return subprocess.run(["git", "-C", str(tree), "cat-file", "blob", rev], check=True,
                              capture_output=True, text=True).stdout
    page_alloc = {sha: subprocess.run(["git", "-C", str(tree), "rev-parse", f"{sha}:mm/page_alloc.c"], check=True,
                                      capture_output=True, text=True).stdout.strip() for sha in (p1, p2)}
    subjects = {sha: subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%s", sha], check=True,
                                    capture_output=True, text=True).stdout.strip() for sha in (p1, p2)}
    doc = show(f"{base}:{DOC}")
    chain, head, n = [base], base, 0
    for step in ["u"] * 4 + [p1] + ["u"] * 6 + [p2] + ["u"] * 4:
        if step == "u":
            n += 1
            doc += f"\nUnrelated documentation change {n}.\n"
            head = _commit(tree, head, {DOC: _blob(tree, doc)}, f"Documentation/mm: unrelated change {n}")
        else:
            head = _commit(tree, head, {"mm/page_alloc.c": page_alloc[step]}, subjects[step])
        chain.append(head)
    subprocess.run(["git", "-C", str(tree), "update-ref", REF, head], check=True)
    assert len(chain) == 17
    return tree, chain


def _bisect(db: Path, function: str, spec: str, *cond: str) -> dict:
    proc = run_cli("bisect", function, spec, "--toolchain", TC, *cond, "--json", db=db, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _brute_force(db: Path, function: str, chain: list[str], cond: tuple[str, ...]) -> str:
    """The first commit after chain[0] whose stored state meets the condition, scanning them all."""
    from analyzer.align import placement
    from db.store import open_store
    with open_store(db) as store:
        points = {p.commit_sha: p for p in store.function_history(function, TC, target=TARGET)}
    state = {}
    for sha in chain:
        p = points.get(sha)
        assert p is None or p.status == "ok"
        state[sha] = (p.size or 0, p.inlined_count or 0) if p else (0, 0)
    base_size = state[chain[0]][0]

    def holds(size: int, inlined: int) -> bool:
        if cond[0] == "--grew-by":
            return size - base_size >= int(cond[1])
        if cond[0] == "--outlined":
            return size > 0
        if cond[0] == "--inlined":
            return size == 0 and inlined > 0
        return placement(size).lines > placement(base_size).lines
    assert not holds(*state[chain[0]])
    return next(sha for sha in chain[1:] if holds(*state[sha]))


CASES = [  # (function, range as indexes into the chain, condition, the index it must find)
    ("__rmqueue_smallest", (0, 11), ("--outlined",), 5),
    ("get_page_from_freelist", (5, 16), ("--grew-by", "1000"), 12),
    ("__rmqueue_fallback", (5, 16), ("--inlined",), 12),
    ("rmqueue_bulk", (5, 16), ("--crossed-line",), 12),
]


def test_bisect_against_brute_force(bisect_range, tmp_path, example_series, bloat_o_meter):
    tree, chain = bisect_range
    example_series(TC)                       # the example objects: the patch commits' builds reuse them
    db = tmp_path / "store.db"
    whole = f"{chain[0]}..{chain[-1]}"

    # an empty store: only the ends and the midpoints are built
    first = {}
    for function, (a, b), cond, want in CASES:
        res = _bisect(db, function, f"{chain[a]}..{chain[b]}", *cond)
        n = b - a
        assert res["commits"] == n
        assert res["first"]["sha"] == chain[want], (function, cond, res["steps"])
        assert res["parent"]["sha"] == chain[want - 1]
        assert len(res["steps"]) <= 2 + math.ceil(math.log2(n)) + 1, res["steps"]
        first[function] = res
    # the first search built A, B and its midpoints, fewer than the commits of its range
    assert 0 < first["__rmqueue_smallest"]["built"] < 11

    # every commit of the whole range built and stored: the brute-force scan of the same results
    proc = run_cli("run", whole, "--toolchains", TC, "--targets", TARGET, db=db, timeout=3600)
    assert proc.returncode == 0, proc.stderr
    for function, (a, b), cond, want in CASES:
        assert _brute_force(db, function, chain[a:b + 1], cond) == chain[want]
        again = _bisect(db, function, f"{chain[a]}..{chain[b]}", *cond)
        assert again["built"] == 0
        assert again["first"]["sha"] == first[function]["first"]["sha"]

    # the bloat-o-meter row is the kernel's script's row for the function on the two objects
    from toolchains.build import BuildOptions, build_commit
    from toolchains.kbuild import Config
    for function, _, _, want in CASES:
        objs = [build_commit(tree, chain[i], TC, [TARGET], Config(), BuildOptions()).targets[0].path
                for i in (want - 1, want)]
        oracle = bloat_o_meter(*objs).stdout.decode().splitlines()
        rows = first[function]["bloat_rows"].splitlines()
        assert rows[0] == oracle[1]                      # bloat-o-meter's header line
        mine = [ln for ln in oracle[2:-1] if ln.split()[0].split(".")[0] == function]
        assert rows[1:] == mine and mine, (rows, oracle)

    # the plain text names the commit, the row and the compiler's reasons
    out = run_cli("bisect", "__rmqueue_smallest", f"{chain[0]}..{chain[11]}", "--toolchain", TC, "--outlined", db=db)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].startswith(chain[5])
    assert "__rmqueue_smallest                             -     432    +432" in out.stdout
    assert "not inlined into __rmqueue: " in out.stdout

    # over the whole range patch 2 undoes patch 1: the condition does not hold at B, one line, exit 1
    bad = run_cli("bisect", "__rmqueue_smallest", whole, "--toolchain", TC, "--outlined", db=db)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "never has an out-of-line copy" in bad.stderr


def test_bisect_bad_input(tmp_path):
    db = tmp_path / "store.db"
    for args, msg in [(["f", "HEAD", "--toolchain", TC, "--outlined"], "give a range A..B"),
                      (["f", "A..B", "--toolchain", TC], "give exactly one of"),
                      (["f", "A..B", "--toolchain", TC, "--outlined", "--inlined"], "give exactly one of"),
                      (["f", "A..B", "--toolchain", TC, "--grew-by", "0"], "positive number"),
                      (["f", "A..B", "--toolchain", "gcc-0", "--outlined"], "gcc-0")]:
        proc = run_cli("bisect", *args, db=db, timeout=120)
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and msg in proc.stderr, (args, proc.stderr)

"""The README's promise about ``sizewatch bisect`` and commits that do not build, on the fake kernel
(tests/fakekernel: real compilers, builds in a fraction of a second): such a commit is skipped, as
``git bisect skip`` does, and when the answer hinges on skipped commits all candidates are printed.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from buildtrees import commit_on, edit, fake_tree
from conftest import sizewatch_cmd

TC = "gcc-12"
INLINE = "static inline int rmqueue_smallest"
OUTLINED = "static __attribute__((noinline)) int rmqueue_smallest"
BROKEN = ("int alloc_pages(unsigned int gfp, unsigned int order)\n{",
          "int alloc_pages(unsigned int gfp, unsigned int order)\n{\n\tint broken = ;")


@pytest.fixture
def chain(tmp_path):
    """base → u1 → broken (does not compile) → u2 → outlined (rmqueue_smallest gets an out-of-line
    copy) → u3, and beside it base → broken+outlined → fixed (builds, still outlined) → u4."""
    tree, base = fake_tree(tmp_path / "linux-fake")
    pa = "mm/page_alloc.c"

    def slab(parent: str, n: int) -> str:
        return commit_on(tree, parent, {"mm/slab.c": edit(tree, parent, "mm/slab.c", "\n", f"\n/* unrelated {n} */\n")},
                         f"mm/slab: unrelated change {n}")
    c = {"base": base}
    c["u1"] = slab(base, 1)
    c["broken"] = commit_on(tree, c["u1"], {pa: edit(tree, c["u1"], pa, *BROKEN)}, "mm: a change that does not build")
    c["u2"] = commit_on(tree, c["broken"], {pa: edit(tree, base, pa, "\n", "\n")}, "mm: build again")
    c["outlined"] = commit_on(tree, c["u2"], {pa: edit(tree, base, pa, INLINE, OUTLINED)}, "mm: rmqueue_smallest out of line")
    c["u3"] = slab(c["outlined"], 3)
    both = edit(tree, base, pa, INLINE, OUTLINED).replace(*BROKEN)
    c["broken_outlined"] = commit_on(tree, base, {pa: both}, "mm: out of line, and does not build")
    c["fixed"] = commit_on(tree, c["broken_outlined"], {pa: edit(tree, base, pa, INLINE, OUTLINED)}, "mm: fix the build")
    c["u4"] = slab(c["fixed"], 4)
    return tree, c, {**os.environ, "SIZEWATCH_CACHE": str(tmp_path / "cache")}, tmp_path / "store.db"


def bisect(tree, env, db, spec: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*sizewatch_cmd(), "bisect", "rmqueue_smallest", spec, "--toolchain", TC, "--outlined",
                           "--tree", str(tree), "--db", str(db), *extra], capture_output=True, text=True, env=env,
                          timeout=600)


def test_a_commit_that_does_not_build_is_skipped(chain):
    tree, c, env, db = chain
    p = bisect(tree, env, db, f"{c['base']}..{c['u3']}", "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["first"]["sha"] == c["outlined"] and res["parent"]["sha"] == c["u2"] and res["candidates"] == []
    steps = {s["sha"]: s["holds"] for s in res["steps"]}
    assert steps[c["broken"]] is None                       # built, failed, skipped: not taken as either side
    assert f"bisect: {c['broken'][:12]} skipped (build failed)" in p.stderr


def test_an_answer_hinging_on_a_skipped_commit_prints_all_candidates(chain):
    tree, c, env, db = chain
    p = bisect(tree, env, db, f"{c['base']}..{c['u4']}")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == ("rmqueue_smallest has an out-of-line copy first at one of these commits "
                        f"(skipped: a {TC} build that failed cannot be judged):"), p.stdout
    assert lines[1:3] == [f"  {c['broken_outlined'][:12]} mm: out of line, and does not build  [skipped: does not build]",
                          f"  {c['fixed'][:12]} mm: fix the build"], p.stdout
    assert f"bisect: {c['broken_outlined'][:12]} skipped (build failed)" in p.stderr
    res = json.loads(bisect(tree, env, db, f"{c['base']}..{c['u4']}", "--json").stdout)
    assert res["first"] is None and [x["sha"] for x in res["candidates"]] == [c["broken_outlined"], c["fixed"]]
    assert res["built"] == 0                                # the second search read the store: nothing built again

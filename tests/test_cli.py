"""The command line's own conventions: usage errors are one line on stderr with exit 2, for
``sizewatch`` and every subcommand as for ``sizediff``; help still works."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import COMMANDS


def _exe(name: str) -> list[str]:
    exe = shutil.which(name, path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "cli"]


@pytest.mark.parametrize("args, expect", [
    (["nosuch"], "sizewatch: No such command 'nosuch'."),
    (["inspect"], "sizewatch inspect: Missing argument 'OBJ'."),
    (["history"], "sizewatch history: Missing argument 'FUNCTION'."),
    (["toolchains", "--bogus"], "sizewatch toolchains: No such option '--bogus'"),
    (["inspect", "--cost", "--cu", "mm/page_alloc.c", "x.o"], "sizewatch inspect: --cu does not go with --cost"),
    (["inspect", "--cost", "--all", "--remarks", "r.txt", "x.o"],
     "sizewatch inspect: --remarks, --all do not go with --cost"),
    (["inspect", "--cost", "--no-estimate", "--mcpu", "znver3", "x.o"],
     "sizewatch inspect: --mcpu and --no-estimate contradict each other"),
    (["report", "--db"], "sizewatch: Option '--db' requires an argument."),
])
def test_usage_errors_are_one_line_exit_2(args, expect):
    p = subprocess.run(_exe("sizewatch") + args, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(expect), p.stderr
    assert "Traceback" not in p.stderr and "Usage:" not in p.stderr


def test_sizediff_usage_error_is_one_line_exit_2():
    exe = shutil.which("sizediff", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "cli.sizediff"]
    p = subprocess.run(cmd + ["--nosuch", "a", "b"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [p.stderr.strip()] and p.stderr.startswith("sizediff: No such option '--nosuch'")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help(name):
    p = subprocess.run(_exe("sizewatch") + [name, "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"Usage: sizewatch {name} ")


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory) -> Path:
    """A git tree of three commits tagged a, b, c (no kernel: a bad range fails before any build)."""
    tree = tmp_path_factory.mktemp("tree")
    for tag in "abc":
        (tree / "f").write_text(tag)
        for args in ((["init", "-q"],) if tag == "a" else ()) + (["add", "f"], ["commit", "-q", "-m", tag],
                                                                 ["tag", tag]):
            subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                           check=True, capture_output=True)
    return tree


@pytest.mark.parametrize("spec", ["a..b..c", "a...c", "a,b..c"])
@pytest.mark.parametrize("command", ["run", "build", "bisect"])
def test_a_range_that_is_not_two_revisions_is_one_line(small_tree, tmp_path, command, spec):
    """git alone would print its usage line (a..b..c) or "unknown revision '.c'" (a...c)."""
    db = ["--db", str(tmp_path / "s.db")]
    args = {"run": ["run", spec, "--tree", str(small_tree), *db],
            "build": ["build", "--commits", spec, "--tree", str(small_tree)],
            "bisect": ["bisect", "f", spec, "--toolchain", "gcc-12", "--outlined", "--tree", str(small_tree), *db]}
    p = subprocess.run(_exe("sizewatch") + args[command], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert p.stderr.splitlines() == [f"sizewatch: bad range {spec!r}: give BASE..HEAD (two revisions)"], p.stderr


def test_a_range_of_two_revisions_still_reads(small_tree):
    from toolchains.git import commit_list, commit_range, split_range
    assert split_range("a..c") == ("a", "c") and split_range("a..") == ("a", "HEAD") and split_range("a") is None
    r = commit_range(small_tree, "a..c")
    assert len(r.commits) == 2 and commit_list(small_tree, "a..c") == [r.base, *r.commits]

"""Hot-path lists: the allocator default, extended, trimmed or replaced by a user file."""
from __future__ import annotations

import pytest

from analyzer.errors import InputError
from analyzer.findings import findings
from analyzer.hotpaths import HotPaths, load
from analyzer.inlines import analyze
from conftest import FIXTURES


def test_default_list_is_clone_aware():
    hot = HotPaths()
    for name in ("get_page_from_freelist", "__rmqueue_smallest", "free_unref_page_commit", "rmqueue_bulk.constprop.0",
                 "__alloc_pages"):
        assert name in hot
    assert "free_area_init" not in hot and "__alloc_pages_slowpath" not in hot


def test_user_file(tmp_path):
    f = tmp_path / "hot.txt"
    f.write_text("# mine\ntoo_big\n-get_page_from_freelist\nmy_*   # globs\n")
    hot = load(f)
    assert "too_big" in hot and "my_helper.isra.0" in hot and "__rmqueue" in hot
    assert "get_page_from_freelist" not in hot
    f.write_text("!replace\ntoo_big\n")
    assert load(f).patterns == ("too_big",)
    f.write_text("two words\n")
    with pytest.raises(InputError, match="bad hot-path pattern"):
        load(f)
    with pytest.raises(InputError, match="cannot read hot-path list"):
        load(tmp_path / "missing.txt")


def test_hot_list_changes_the_finding(compile_c, tmp_path):
    facts = analyze(compile_c("clang-19", FIXTURES / "inline_cases.c", name="hot-clang.o"))
    assert {f.kind for f in findings(facts) if f.function == "too_big"} == {"inline_not_inlined"}
    f = tmp_path / "hot.txt"
    f.write_text("too_big\n")
    assert {x.kind for x in findings(facts, load(f)) if x.function == "too_big"} == {"hot_not_inlined"}

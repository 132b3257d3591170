"""Measurements under emulation in the store (migration 0016/0017, issue 26): written whole with their
build or alone for a stored build, read back as the same ``analyzer.runtime.Runtime`` on sqlite and
PostgreSQL, covered by the change counters, damage read as a marked failure and named by ``db check``."""
from __future__ import annotations

import pytest

from db.check import check_store
from db.errors import StoreError
from db.models import BuildRecord, Commit, ConfigInfo, ObjectRecord
from db.sqlite import take_damage
from db.store import open_store
from pgserver import RawSql
from runtime_data import failed, runtime

A, B = "a" * 40, "b" * 40


def _vmlinux(sha: str, parent: str | None, rt=None, toolchain: str = "gcc-12", status: str = "ok",
             analysis: int = 5) -> BuildRecord:
    return BuildRecord("t", Commit(sha, parent, f"subject {sha[:4]}", "A <a@b>", "2024-01-01"), toolchain,
                       f"{toolchain} 1.0", ConfigInfo("allocator", config_hash="h"), "vmlinux", status,
                       objects=[ObjectRecord("vmlinux", text=100)] if status == "ok" else [],
                       analysis_version=analysis, runtime=rt)


def test_round_trip_with_the_build_and_alone(store_db):
    with open_store(store_db) as s:
        rt = runtime()
        base = s.record_build(_vmlinux(A, None, rt))
        assert s.runtime_for(base).to_dict() == rt.to_dict()
        assert s.runtime_for(base).order(0).functions["get_page_from_freelist"].instructions == 137
        # a build stored without one: none, not zeros; measured later, alone, and its commit's stamp moves
        head = s.record_build(_vmlinux(B, A))
        assert s.runtime_for(head) is None
        before, store_before = s.change_stamp(commit=B), s.change_stamp()
        grown = runtime({0: {"get_page_from_freelist": 6}})
        s.record_runtime(head, grown)
        assert s.change_stamp(commit=B) != before and s.change_stamp() != store_before
        assert s.runtime_for(head).order(0).instructions == 381
        # measured again: replaced whole (no rows of the first left behind)
        s.record_runtime(head, failed())
        got = s.runtime_for(head)
        assert (got.status, got.orders) == ("failed", []) and got.message.startswith("guest did not reach")
        n = s.connection().execute("SELECT count(*) FROM runtime_functions WHERE build_id = ?", (head,)).fetchone()[0]
        assert n == 0
        with pytest.raises(StoreError, match="no build 999 in the store"):
            s.record_runtime(999, rt)
        # deleting the build takes its measurement with it (the store's connection: foreign keys on)
        s.connection().execute("DELETE FROM builds WHERE id = ?", (base,))
        assert s.runtime_for(base) is None
        assert RawSql(store_db).one("SELECT count(*) FROM runtime_functions") == 0


def test_written_atomically_with_its_build(store_db):
    with open_store(store_db) as s:
        bad = runtime()
        bad.emulator = object()                      # fails in the runtime's insert, after the build's rows
        with pytest.raises(TypeError):
            s.record_build(_vmlinux(A, None, bad))
        assert s.find_build("t", A, "gcc-12", "allocator", "vmlinux") is None
        assert RawSql(store_db).one("SELECT count(*) FROM runtimes") == 0
        bid = s.record_build(_vmlinux(A, None))
        with pytest.raises(TypeError):
            s.record_runtime(bid, bad)
        assert s.runtime_for(bid) is None


def test_a_measurement_the_stored_build_lacks_replaces_it_once(store_db):
    """``record_build(replace=False)`` (two workers, one key) keeps the first result, except that a
    measured build replaces a stored one that was not measured (``--measure`` on a stored range)."""
    with open_store(store_db) as s:
        plain = s.record_build(_vmlinux(A, None), replace=False)
        measured = s.record_build(_vmlinux(A, None, runtime()), replace=False)
        assert measured != plain and s.runtime_for(measured) is not None
        again = s.record_build(_vmlinux(A, None, runtime({0: {"__alloc_pages": 1}})), replace=False)
        assert again == measured and s.runtime_for(measured).order(0).instructions == 375
        assert s.record_build(_vmlinux(A, None), replace=False) == measured


def test_history_of_a_function(store_db):
    with open_store(store_db) as s:
        s.record_build(_vmlinux(A, None, runtime()))
        s.record_build(_vmlinux(B, A, runtime({0: {"get_page_from_freelist": 6}}, calls={0: {"__alloc_pages": 1}})))
        s.record_build(_vmlinux(B, A, runtime({0: {"get_page_from_freelist": 4}}), toolchain="clang-19"))
        s.record_build(_vmlinux("c" * 40, B, failed()))
        pts = s.runtime_history("get_page_from_freelist")
        assert [(p.commit_sha[0], p.toolchain, p.orders[0][0]) for p in pts] == \
            [("a", "gcc-12", 137), ("b", "clang-19", 141), ("b", "gcc-12", 143)]
        assert pts[0].orders[4] == (298, 1.0, round(298 * 3.6 / 64))
        assert [p.toolchain for p in s.runtime_history("get_page_from_freelist", toolchain="clang-19")] == ["clang-19"]
        assert s.runtime_history("__rmqueue_smallest")[0].orders.keys() == {4}
        assert s.runtime_history("no_such_function") == [] and s.runtime_history("subject aaaa") == []
        assert pts[0].to_dict()["orders"]["0"] == {"instructions": 137, "calls": 1.0, "lines": 8}


def test_damage_reads_as_marked_failure_and_db_check_names_it(store_db):
    with open_store(store_db) as s:
        bid = s.record_build(_vmlinux(A, None, runtime()))
        other = s.record_build(_vmlinux(B, A, runtime()))
    assert check_store(store_db).ok, check_store(store_db).line()
    raw = RawSql(store_db)
    raw.execute("UPDATE runtimes SET data = ? WHERE build_id = ?", ('{"status": "ok", "orders": {"0": {', bid))
    raw.execute("UPDATE runtimes SET data = ? WHERE build_id = ?", ('{"status": "weird"}', other))
    take_damage()
    with open_store(store_db) as s:
        got = s.runtime_for(bid)
        assert got.status == "failed" and got.message == f"[unreadable in the store: runtime measurement of build {bid}]"
        assert s.runtime_for(other).status == "failed"
    assert take_damage() == [f"runtime measurement of build {bid}", f"runtime measurement of build {other}"]
    res = check_store(store_db)
    assert not res.ok and "1 rows of runtimes.data not JSON" in res.line()
    assert f"2 runtime measurements not readable as one (build {bid}, {other})" in res.line()

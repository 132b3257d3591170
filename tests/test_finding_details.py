"""Findings' details read as one dataclass per shape (analyzer.finding_details): every field the
analyzer wrote is the attribute readers get, checked on the details the example series' run stored
(the oracle is that stored JSON itself, read with the json module)."""
from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from analyzer import finding_details as fd
from analyzer.align import Placement
from db.store import open_store

pytestmark = pytest.mark.kernel

CLASSES = {"always_inline_copy": fd.OutOfLineCopy, "hot_not_inlined": fd.OutOfLineCopy,
           "inline_not_inlined": fd.OutOfLineCopy, "newly_inlined": fd.NowInlined,
           "newly_out_of_line": fd.NowOutOfLine, "pushed_out_of_line": fd.NowOutOfLine,
           "boundary_crossing": fd.Crossing, "likely_path_call": fd.LikelyPath, "likely_path_lines": fd.LikelyPath,
           "likely_path_cycles": fd.LikelyPath}


def _stored(db) -> list[tuple[str, dict]]:
    con = sqlite3.connect(db)
    try:
        return [(k, json.loads(d)["details"]) for k, d in con.execute("SELECT kind, data FROM findings ORDER BY id")]
    finally:
        con.close()


def _plain(v):
    if isinstance(v, Placement):
        return v.to_dict()
    return list(v) if isinstance(v, tuple) else v


def test_every_stored_field_is_an_attribute(example_store):
    db, _ = example_store
    stored = _stored(db)
    kinds = {k for k, _ in stored}
    # the example series stores these shapes (the inline changes it exists to show, their likely path)
    assert {"newly_inlined", "pushed_out_of_line", "likely_path_call"} <= kinds, kinds
    for kind, raw in stored:
        got = fd.read(kind, raw)
        assert type(got) is CLASSES[kind], kind
        fields = {f.name for f in dataclasses.fields(got)}
        for key, value in raw.items():
            if key == "reason":
                assert got.reason == value, (kind, raw)
            else:
                assert key in fields, (kind, key)
                assert _plain(getattr(got, key)) == value, (kind, key)


def test_the_store_reads_details_once_and_marks_a_wrong_type_as_damage(example_store, tmp_path):
    db, _ = example_store
    copy = tmp_path / "damaged.db"
    a, b = sqlite3.connect(db), sqlite3.connect(copy)
    a.backup(b)
    a.close()
    (fid, build, kind, raw), = b.execute(
        "SELECT id, build_id, kind, data FROM findings WHERE kind = 'pushed_out_of_line' ORDER BY id LIMIT 1")
    want = json.loads(raw)["details"]
    b.execute("UPDATE findings SET data = json_set(data, '$.details.pushed_by', 5) WHERE id = ?", (fid,))
    b.commit()
    b.close()
    from db.sqlite import take_damage
    take_damage()
    with open_store(str(copy), read_only=True) as store:
        hit = [r for r in _findings(store, copy, build) if r.kind == kind and r.data["details"]["pushed_by"] == 5]
    assert len(hit) == 1 and hit[0].details == fd.NowOutOfLine()
    assert take_damage() == [f"details of a {kind} finding (build {build}): details field 'pushed_by' holds int"]
    with open_store(str(db), read_only=True) as store:
        healthy = [r for r in _findings(store, db, build) if r.kind == kind and r.function == hit[0].function]
    assert len(healthy) == 1 and healthy[0].details.pushed_by == tuple(want["pushed_by"])
    assert healthy[0].details.reason == want["reason"] and take_damage() == []


def _findings(store, db, build: int) -> list:
    """Every finding row of a build, through the store (object findings and each comparison's)."""
    con = sqlite3.connect(db)
    try:
        bases = {b for b, in con.execute("SELECT base_build_id FROM findings WHERE build_id = ? "
                                         "AND base_build_id IS NOT NULL", (build,))}
    finally:
        con.close()
    rows = store.findings_for(build)
    return rows + [r for b in sorted(bases) for r in store.findings_for(build, b) if r.base_build_id == b]


def test_a_wrong_type_names_its_field():
    with pytest.raises(fd.BadDetails, match="details field 'reasons' holds str"):
        fd.read("newly_out_of_line", {"reasons": "inline limit"})
    with pytest.raises(fd.BadDetails, match="details hold list, not an object"):
        fd.read("newly_inlined", [])
    assert fd.read("no_such_kind", {"reasons": ["a", "b", "a"]}).reasons == ("a", "b")
    assert fd.read("newly_out_of_line", {"reason": "r"}).reason == "r"

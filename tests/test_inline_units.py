"""Inline cost per unit (analyzer.inline_units) and its cache (ci.pipeline.unit_cache), issue 14.

The oracle is the whole decode (analyzer.inline_cost.inline_cost, itself checked against
pyelftools in test_inline_cost): a result assembled from cached units must be equal to it,
whatever the cache holds (nothing, everything, damaged or forged entries).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from analyzer.errors import InputError
from analyzer.inline_cost import inline_cost
from analyzer.inline_units import UnitCost, inline_cost_by_unit, unit_names
from ci.pipeline.inline_costs import cached_inline_cost
from ci.pipeline.unit_cache import (SETTLED_NS, UnitCache, _fs_now, _object_sha256, _read_hashes, _write_hashes,
                                    build_id, hashes_path, object_of)
from conftest import NATIVE

ENGINES = ["fast", NATIVE]


@pytest.fixture(scope="module")
def tiny():
    from tests.kernel_images import tiny_vmlinux
    return tiny_vmlinux()


def _keys(path: Path) -> dict[str, str]:
    """Stand-in keys (the unit name and the file's build-id): what ObjectKeys gives, for one file."""
    bid = build_id(path).hex()
    return {n: hashlib.sha256(f"{bid}\0{n}".encode()).hexdigest() for n in unit_names(path) if n}


@pytest.mark.kernel
@pytest.mark.slow                   # the allocator vmlinux (tiny): a whole-kernel build
@pytest.mark.parametrize("engine", ENGINES)
def test_cold_and_warm_equal_a_whole_decode(tiny, engine):
    for path in tiny.vmlinux:
        whole = inline_cost(path, engine=engine).to_dict()
        store: dict[str, UnitCost] = {}
        cold = inline_cost_by_unit(path, lambda _o, n, _l: None, engine=engine)
        assert not cold.whole and cold.reused == 0 and cold.decoded == whole["units"]
        assert json.dumps(cold.cost.to_dict()) == json.dumps(whole)      # same order too
        for off, uc in cold.fresh.items():
            store[cold.names[off]] = UnitCost.from_dict(json.loads(json.dumps(uc.to_dict())))
        warm = inline_cost_by_unit(path, lambda _o, n, _l: store.get(n), engine=engine)
        assert warm.decoded == 0 and warm.reused == whole["units"] and not warm.fresh
        assert json.dumps(warm.cost.to_dict()) == json.dumps(whole)
        # one unit left out of the cache: decoded alone, the rest reused
        del store["mm/page_alloc.c" if "mm/page_alloc.c" in store else
                  next(n for n in store if n.endswith("/mm/page_alloc.c"))]
        one = inline_cost_by_unit(path, lambda _o, n, _l: store.get(n), engine=engine)
        assert one.decoded == 1 and one.reused == whole["units"] - 1
        assert one.cost.to_dict() == whole


@pytest.mark.kernel
@pytest.mark.slow                   # the allocator vmlinux: a whole-kernel build per toolchain
@pytest.mark.parametrize("toolchain", ["gcc-12", "clang-19"])
def test_every_unit_counts_what_llvm_dwarfdump_prints(toolchain):
    """Unit by unit, independently of the whole decode: each unit's inlined instances (its
    UnitCost's callees, what the cache keeps) are as many DW_TAG_inlined_subroutine DIEs as
    llvm-dwarfdump-19 prints in that unit, named alike, in file order (tests/dbg_oracles.py), in the
    allocator vmlinux at the series' base and patch 1 of each compiler."""
    from dbg_oracles import dwarfdump_summary
    from tests.kernel_images import allocator_vmlinux
    for path in allocator_vmlinux(toolchain, 2).vmlinux:
        want = dwarfdump_summary(path)
        cold = inline_cost_by_unit(path, lambda _o, n, _l: None)
        assert not cold.whole and len(cold.fresh) == len(cold.names) == len(want.units)
        got = [(cold.names[off], sum(c.instances for c in cold.fresh[off].callees)) for off in sorted(cold.fresh)]
        assert got == want.units and sum(n for _u, n in got) == want.instances > 10000


@pytest.mark.kernel
@pytest.mark.slow                   # the allocator vmlinux (tiny): a whole-kernel build
def test_the_base_cache_serves_patch_1(tiny, tmp_path):
    """The series' base and patch 1, built in the build dir in turn (kbuild rebuilds the changed
    objects): patch 1 decodes only the units whose object changed, and equals its whole decode."""
    from ci.pipeline.builder import build_many
    from tests.kernel_images import CONFIG, TOOLCHAIN
    from toolchains.build import BuildOptions, toolchain_info
    opts = BuildOptions(reports=False, jobs=2, timeout=2400, use_cache=False, out_root=tmp_path / "out")
    cache = UnitCache(tmp_path / "units")
    got = []
    # the pipeline's way: builds in a thread, the keys taken there before the next build starts
    compiler = toolchain_info(TOOLCHAIN, CONFIG.arch)
    built = dict(build_many(tiny.tree, [(sha, compiler, ["vmlinux"]) for sha in tiny.shas], CONFIG, opts))
    for sha in tiny.shas:
        b = built[(sha, TOOLCHAIN)]
        assert b.status == "ok", b.errors
        keys = b.unit_keys["vmlinux"]
        path = b.objects["vmlinux"]
        assert len(keys) > 400 and any(n.endswith("/mm/page_alloc.c") for n in keys)
        r = cached_inline_cost(path, keys, cache)
        assert r.cost.to_dict() == inline_cost(path).to_dict()
        got.append((r, keys))
    (base, base_keys), (patch, patch_keys) = got
    assert base.reused == 0
    changed = {n for n in patch_keys if base_keys.get(n) != patch_keys[n]}
    assert any(n.endswith("/mm/page_alloc.c") for n in changed)
    assert not patch.whole and patch.decoded == len(changed) + (patch.cost.units - len(patch_keys))
    assert patch.decoded <= 10 and patch.reused >= patch.cost.units - 10


@pytest.mark.kernel
@pytest.mark.slow                   # the allocator vmlinux (tiny): a whole-kernel build
def test_damaged_and_forged_entries_are_decoded_again(tiny, tmp_path):
    path = tiny.vmlinux[1]
    whole = inline_cost(path).to_dict()
    keys = _keys(path)
    cache = UnitCache(tmp_path / "units")
    assert cached_inline_cost(path, keys, cache).cost.to_dict() == whole
    files = sorted((tmp_path / "units").glob("*/*.json"))
    assert len(files) == whole["units"]

    def read(f: Path) -> tuple[dict, dict]:
        head, payload = f.read_bytes().split(b"\n", 1)
        return json.loads(head), json.loads(payload)

    def write(f: Path, head: dict, cost: dict, sealed: bool) -> None:
        """``sealed``: with the HMAC under the cache's own key (what only sizewatch can write), so
        that the checks after it are what refuses the entry."""
        payload = json.dumps(cost).encode()
        if sealed:
            head = dict(head, hmac=cache._seal(head["key"], payload))
        f.write_bytes(json.dumps(head).encode() + b"\n" + payload)

    # by the path in the tree: some units are named by the build's source worktree path as well
    by_unit = {re.sub(r"^(?:.*/)?worktrees/[^/]+/", "", read(f)[1]["unit"]): f for f in files}
    # 1: cut short
    pa = by_unit["mm/page_alloc.c"]
    pa.write_bytes(pa.read_bytes()[:100])
    # 2: a number changed, the HMAC no longer matching
    f2 = by_unit["kernel/fork.c"]
    head, cost = read(f2)
    cost["outside_symbols"] += 1
    write(f2, head, cost, sealed=False)
    # 3: sealed, but a callee's callers no longer summing to its bytes
    f3 = by_unit["kernel/exit.c"]
    head, cost = read(f3)
    next(c for c in cost["callees"] if c[3])[3] += 7
    write(f3, head, cost, sealed=True)
    # 4: another unit's valid, sealed entry under this unit's key (a key collision, a stale object)
    f4 = by_unit["mm/filemap.c"]
    write(f4, read(f4)[0], read(by_unit["kernel/sched/core.c"])[1], sealed=True)
    # 5: not JSON at all
    by_unit["lib/string.c"].write_bytes(b"\xff\x00garbage")
    # forgeries that keep every sum a real unit keeps: from_dict and the file's checks accept them,
    # only the HMAC under the key outside the cache (ci.pipeline.cache_key) tells
    forged = []

    def forge(unit: str, change, head_of) -> None:
        f = by_unit[unit]
        head, cost = read(f)
        change(cost)
        UnitCost.from_dict(cost)                    # consistent: would have been merged
        payload = json.dumps(cost).encode()
        f.write_bytes(json.dumps(head_of(head, payload)).encode() + b"\n" + payload)
        forged.append(unit)

    def plain(head: dict, payload: bytes) -> dict:  # the old format's head, its checksum recomputed
        return {"key": head["key"], "sha256": hashlib.sha256(payload).hexdigest()}

    def rename(cost: dict) -> None:                 # 7: a callee renamed (its bytes charged to another)
        next(c for c in cost["callees"] if c[3])[0] = "forged_callee"

    def move(cost: dict) -> None:                   # 8: bytes moved between two callees of one caller
        rows = [(c, i) for c in cost["callees"] for i in range(0, len(c[6]), 2) if c[6][i + 1]]
        (a, i), (b, j) = next(((x, y) for x in rows for y in rows if x[0] is not y[0] and x[0][6][x[1]] == y[0][6][y[1]]))
        n = a[6][i + 1]
        a[3] -= n
        a[6][i + 1] -= n
        b[3] += n
        b[6][j + 1] += n

    def redeclared(cost: dict) -> None:             # 9: a callee's declaring file changed
        next(c for c in cost["callees"] if c[3])[1] = "include/linux/forged.h"

    import hmac as _hmac
    forge("mm/slub.c", rename, plain)
    forge("mm/vmalloc.c", move, lambda head, payload: dict(plain(head, payload), hmac=head["hmac"]))
    forge("mm/rmap.c", redeclared,                  # sealed, but with a key of the forger's own
          lambda head, payload: dict(head, hmac=_hmac.new(b"k" * 32, b"entry\0" + head["key"].encode() + b"\0"
                                                         + payload, hashlib.sha256).hexdigest()))
    # 6: a link to an endless device
    used = {"mm/page_alloc.c", "kernel/fork.c", "kernel/exit.c", "mm/filemap.c", "kernel/sched/core.c", "lib/string.c",
            *forged}
    f6 = by_unit[next(u for u in sorted(by_unit) if u.startswith("mm/") and u not in used)]
    f6.unlink()
    f6.symlink_to("/dev/zero")
    r = cached_inline_cost(path, keys, cache)
    assert r.cost.to_dict() == whole
    assert cache.damaged == 8                       # 4 is a valid entry: refused by its length
    assert r.decoded == 9 and r.reused == whole["units"] - 9
    # and they were written again: all reused next time
    again = cached_inline_cost(path, keys, UnitCache(tmp_path / "units"))
    assert again.decoded == 0 and again.cost.to_dict() == whole


@pytest.mark.kernel
@pytest.mark.slow                   # the allocator vmlinux (tiny): a whole-kernel build
def test_the_cache_is_bounded(tiny, tmp_path):
    path = tiny.vmlinux[0]
    cache = UnitCache(tmp_path / "units", limit=200_000)
    r = cached_inline_cost(path, _keys(path), cache)
    total = sum(f.stat().st_size for f in (tmp_path / "units").glob("*/*.json"))
    assert 0 < total <= 200_000
    assert not list((tmp_path / "units").glob("*/.tmp-*"))
    assert r.cost.to_dict() == inline_cost(path).to_dict()


GOOD = {"format": 1, "unit": "x", "length": 5, "outside_symbols": 0, "empty_instances": 0,
        "callees": [["f", "a.h", 2, 4, 6, 0, ["g", 4]]], "symbols": [["g", 10, 4, 8]]}


def _bad(**change) -> dict:
    return {**json.loads(json.dumps(GOOD)), **change}


def test_unit_cost_round_trip():
    assert UnitCost.from_dict(GOOD).to_dict() == GOOD


@pytest.mark.parametrize("bad", [None, [], {"format": 1}, _bad(format=99), _bad(length=-1), _bad(length=True),
                                 _bad(extra=1), _bad(callees=[[]]), _bad(callees={}),
                                 _bad(callees=[["f", "a.h", 2, 5, 6, 0, ["g", 4]]]),        # callers != bytes
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 3, ["g", 4]]]),        # empty > instances
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 0, ["g", 4, "g", 0]]]),  # caller twice
                                 _bad(callees=[["f", 7, 2, 4, 6, 0, ["g", 4]]]),
                                 _bad(symbols=[["g", 10, 4, 3]]),                           # inlined > described
                                 _bad(symbols=[["g", 10, 3, 8]]),                           # disagrees with callees
                                 _bad(symbols=[["h", 10, 4, 8]]),
                                 _bad(empty_instances=1),
                                 _bad(callees=[["f", "a.h", True, 4, 6, 0, ["g", 4]]]),     # a bool, not a count
                                 _bad(callees=[["f", "a.h", 2, 4.0, 6, 0, ["g", 4.0]]]),    # a float
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 0, ["g", 5, "k", -1]]]),  # a negative caller
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 0, ["g", 4, "k"]]]),   # odd callers list
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 0, [7, 4]]]),          # caller not a name
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 0, ["g", "4"]]]),
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 0, ["g", 4], 1]]),     # a row too long
                                 _bad(callees=[["f", "a.h", 2, 4, 6, 0, "g4"]]),
                                 _bad(symbols=[["g", 10, 4]]),
                                 _bad(symbols=[["g", 10, True, 8]]),
                                 _bad(symbols=[["g", -10, 4, 8]])])
def test_unit_cost_refuses_what_it_did_not_write(bad):
    with pytest.raises(InputError):
        UnitCost.from_dict(bad)


def test_object_of(tmp_path):
    bd, src = tmp_path / "build", tmp_path / "src"
    assert object_of(f"{src}/mm/page_alloc.c", bd, src) == bd / "mm/page_alloc.o"
    assert object_of("mm/page_alloc.c", bd, src) == bd / "mm/page_alloc.o"
    assert object_of(f"{bd}/lib/gen.c", bd, src) == bd / "lib/gen.o"
    assert object_of(".vmlinux.export.c", bd, src) == bd / ".vmlinux.export.o"
    assert object_of("/elsewhere/x.c", bd, src) is None
    assert object_of("../x.c", bd, src) is None
    assert object_of(f"{src}/include/linux/mm.h", bd, src) is None
    assert object_of(None, bd, src) is None


def test_object_hashes_are_reused_only_while_the_stat_holds(tmp_path):
    """object_keys' memo: a digest is taken from it only when size, inode, mtime and ctime are
    those it was taken with and the object had settled before; else the file is read."""
    import os
    obj = tmp_path / "a.o"
    obj.write_bytes(b"one")
    real = hashlib.sha256(b"one").hexdigest()
    stamp = _fs_now(tmp_path)
    assert stamp is not None and abs(stamp - obj.stat().st_mtime_ns) < 60 * 10**9
    kept: dict = {}
    assert _object_sha256(obj, "a.o", {}, kept, stamp) == real
    assert kept["a.o"][4:] == [stamp, real]     # remembered with its stat and the time before hashing
    assert _object_sha256(obj, "a.o", {}, (unstamped := {}), None) == real and unstamped == {}
    st = os.stat(obj)
    stat4 = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    settled = max(stat4[2], stat4[3]) + SETTLED_NS
    # a planted digest proves which path was taken: the memo's (stat holds, settled) ...
    assert _object_sha256(obj, "a.o", {"a.o": stat4 + [settled, "f" * 64]}, {}, stamp) == "f" * 64
    # ... and not when hashed too soon after the write (racily clean), nor once the stat moved
    assert _object_sha256(obj, "a.o", {"a.o": stat4 + [settled - 1, "f" * 64]}, {}, stamp) == real
    os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert _object_sha256(obj, "a.o", {"a.o": stat4 + [settled, "f" * 64]}, {}, stamp) == real
    obj.write_bytes(b"two")                 # same size, new content
    assert _object_sha256(obj, "a.o", {"a.o": stat4 + [settled, "f" * 64]}, {}, stamp) == hashlib.sha256(b"two").hexdigest()
    assert _object_sha256(tmp_path / "gone.o", "gone.o", {}, {}, stamp) is None
    assert _object_sha256(tmp_path, "dir", {}, {}, stamp) is None
    os.mkfifo(tmp_path / "fifo.o")          # never opened for reading (it would block)
    assert _object_sha256(tmp_path / "fifo.o", "fifo.o", {}, {}, stamp) is None
    # the memo file: written whole, read back; damaged, foreign or not-a-file memos are empty
    memo = tmp_path / "memo" / "m.json"
    _write_hashes(memo, kept)
    assert _read_hashes(memo) == kept
    for bad in (b"", b"[]", b'{"format": 2, "objects": {}}', b"\xff", b'{"format": 1, "objects": {"a.o": [1]}}',
                b'{"format": 1, "objects": {"a.o": [1, 2, 3, 4, 5, "short"]}}'):
        memo.write_bytes(bad)
        assert _read_hashes(memo) == {}
    assert _read_hashes(tmp_path / "missing.json") == {}
    memo.unlink()
    os.mkfifo(memo)
    assert _read_hashes(memo) == {}         # not blocking
    memo.unlink()
    memo.symlink_to("/dev/zero")
    assert _read_hashes(memo) == {}         # not endless
    # kept under the cache, one file per build dir, never in the build dir itself
    assert hashes_path(tmp_path / "b1") != hashes_path(tmp_path / "b2")
    assert tmp_path not in hashes_path(tmp_path / "b1").parents


@pytest.mark.kernel
@pytest.mark.slow                   # the allocator vmlinux (tiny): a whole-kernel build
def test_the_pipeline_record_is_the_same_with_the_cache(tiny, tmp_path):
    """ci.pipeline.inline_costs.object_inline_cost: the stored rows are the same cold, warm and
    without unit keys (the whole decode)."""
    from ci.pipeline.inline_costs import object_inline_cost
    path = tiny.vmlinux[1]
    plain = object_inline_cost(path, "vmlinux")
    cache = UnitCache(tmp_path / "units")
    cold = object_inline_cost(path, "vmlinux", unit_keys=_keys(path), cache=cache)
    warm = object_inline_cost(path, "vmlinux", unit_keys=_keys(path), cache=cache)
    assert plain is not None and plain == cold == warm
    assert len(list((tmp_path / "units").glob("*/*.json"))) == plain.units


def test_the_cache_key_is_kept_outside_the_cache_and_to_this_user(tmp_path, monkeypatch):
    """ci.pipeline.cache_key: made once (0600, never replaced), under $XDG_CONFIG_HOME; refused in one
    line when others could read it, when it is not a regular file of ours, inside the cache or garbled."""
    import os
    import stat
    from analyzer.errors import SizewatchError
    from ci.pipeline.cache_key import key_path, unit_cache_key
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("SIZEWATCH_CACHE", str(tmp_path / "cache"))
    path = key_path()
    assert path == tmp_path / "config" / "sizewatch" / "unit-cache.key"
    key = unit_cache_key()
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert unit_cache_key() == key and os.listdir(path.parent) == ["unit-cache.key"]   # no temp file left

    def refused(match: str) -> None:
        with pytest.raises(SizewatchError, match=match) as e:
            unit_cache_key()
        assert "\n" not in str(e.value)
    for mode in (0o640, 0o604, 0o620):
        path.chmod(mode)
        refused("readable or writable by others")
    path.chmod(0o600)
    path.write_text("not hex\n")
    refused("not a unit cache key")
    path.unlink()
    (tmp_path / "elsewhere").write_text("00" * 32)
    (tmp_path / "elsewhere").chmod(0o600)
    path.symlink_to(tmp_path / "elsewhere")
    refused("not a regular file")
    path.unlink()
    os.mkfifo(path)
    refused("not a regular file")                   # and not blocking on it
    path.unlink()
    path.mkdir()
    refused("not a regular file")
    path.rmdir()
    # never inside the cache dir it authenticates
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cache" / "config"))
    refused("inside the cache dir")
    # an entry sealed under one key is someone else's under another: kept apart, not taken as forged
    a, b = UnitCache(tmp_path / "units", secret=b"a" * 32), UnitCache(tmp_path / "units", secret=b"b" * 32)
    a.put("k", UnitCost.from_dict(GOOD))
    assert b.get("k") is None and b.damaged == 0 and a.get("k").to_dict() == GOOD

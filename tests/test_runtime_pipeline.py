"""The pipeline's side of the runtime measurement (issue 26): ``--measure`` parsed strictly, each built
vmlinux measured in its build's thread with the build dir locked and only while the build dir still
holds that very vmlinux, the result stored with the build in one write, failures stored as one line.

The measuring function itself (``toolchains.runtime``) is replaced here by one returning measurements
built from data (tests/runtime_data.py); the vmlinux files are small linked ELF executables with a
GNU build-id, which is what ties a kept vmlinux to its build dir."""
from __future__ import annotations

import fcntl
import pickle
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from analyzer.errors import InputError
from analyzer.runtime import Runtime
from ci.pipeline import builder, measure as m
from ci.pipeline.analysis import ANALYSIS_VERSION
from ci.pipeline.measure import Measure, parse_measure
from db.models import BuildRecord, Commit, ConfigInfo, ObjectRecord
from db.store import open_store
from runtime_data import failed, runtime
from toolchains.build import ResolvedToolchain
from toolchains.kbuild import prepare_lock
from toolchains.registry import load
from toolchains.results import CommitBuild, TargetResult

GCC = ResolvedToolchain(load("gcc-12"), "gcc-12 1.0")    # the version the stored rows carry


def test_parse_measure_strictly():
    assert parse_measure("") == Measure(tuple(range(9)), 10000)
    assert parse_measure("orders=0,4,8,n=2000") == Measure((0, 4, 8), 2000)
    assert parse_measure("orders=8,0") == Measure((0, 8), 10000)
    assert parse_measure("orders=0-2,n=5") == Measure((0, 1, 2), 5)
    assert parse_measure("n=50") == Measure(tuple(range(9)), 50)
    for spec, why in (("orders=0,x", "give orders=0,4,8 and/or n=PAIRS"), ("n=", "give orders="),
                      ("pairs=3", "give orders="), ("4,8", "give orders="), ("orders=11", "orders run from 0 to 10"),
                      ("n=0", "n runs from 1 to"), ("orders=-1", "give orders="), ("orders=\u00b2", "give orders="),
                      ("orders=1,orders=2", "give orders="), ("n=2000,orders=1", "give orders="),
                      ("orders=0,,4", "give orders=")):
        with pytest.raises(InputError, match=re.escape(why)) as e:
            parse_measure(spec)
        assert str(e.value).startswith("--measure: bad measure spec ") and "\n" not in str(e.value)


def test_run_command_refuses_bad_measure_options_in_one_line(tmp_path):
    from click.testing import CliRunner
    from cli.pipeline import run_cmd
    db = ["--db", str(tmp_path / "s.db")]
    for args, why in ((["--measure", "orders=0,4,zz"], "--measure: bad measure spec 'orders=0,4,zz'"),
                      (["--measure", "n=2000", "--targets", "mm/page_alloc.o"], "add vmlinux to --targets")):
        res = CliRunner().invoke(run_cmd, ["a..b", "--targets", "vmlinux", "--config", "allocator", *args, *db])
        lines = res.stderr.strip().splitlines()
        assert res.exit_code == 1 and len(lines) == 1 and why in lines[0], res.stderr
    assert not (tmp_path / "s.db").exists()                       # refused before anything was opened


def _elf(where: Path, name: str, value: int) -> Path:
    """A linked ELF with its own GNU build-id (the value makes the build-id differ)."""
    src = where / f"{name}.c"
    src.write_text(f"int value = {value};\nint main(void) {{ return value; }}\n")
    out = where / name
    subprocess.run(["gcc", "-O1", "-Wl,--build-id=sha1", "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture
def built(tmp_path):
    """A build dir holding a vmlinux and the kept copy of it the pipeline analyses."""
    bd = tmp_path / "build"
    bd.mkdir()
    kept = _elf(tmp_path, "vmlinux-kept", 1)
    (bd / "vmlinux").write_bytes(kept.read_bytes())
    return bd, kept


def test_measured_in_the_build_dir_holding_that_vmlinux_with_its_lock(built, monkeypatch):
    bd, kept = built
    calls = []

    def fake(build_dir, vmlinux, toolchain, orders, pairs, timeout):
        with open(prepare_lock(build_dir), "a") as f:       # the build dir's lock is held meanwhile
            with pytest.raises(BlockingIOError):
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        calls.append((build_dir, vmlinux, toolchain, orders, pairs, timeout))
        return runtime()
    monkeypatch.setattr(m, "measure_vmlinux", fake)
    got = m.measure_one(bd, kept, "gcc-12", Measure((0, 4), 2000))
    assert got.status == "ok" and got.order(4).instructions == 1400
    assert calls == [(bd, kept, "gcc-12", (0, 4), 2000, 120.0)]
    # the build dir was rebuilt meanwhile (another commit): not measured, said in one line
    (bd / "vmlinux").write_bytes(_elf(bd.parent, "other", 2).read_bytes())
    got = m.measure_one(bd, kept, "gcc-12", Measure())
    assert got.status == "failed" and "no longer holds this vmlinux" in got.message and len(calls) == 1
    got = m.measure_one(bd, bd.parent / "gone", "gcc-12", Measure())
    assert got.status == "failed" and "was deleted before it was measured" in got.message


def test_failures_are_one_line_results_prerequisites_stop(built, monkeypatch):
    bd, kept = built
    monkeypatch.setattr(m, "measure_vmlinux", lambda *a: Runtime("failed", "guest did not reach the benchmark: "
                                                                             "last console line 'x'\nmore\nlines"))
    got = m.measure_one(bd, kept, "gcc-12", Measure())
    assert (got.status, got.message) == ("failed", "guest did not reach the benchmark: last console line 'x'")

    def host_error(*a):
        raise subprocess.TimeoutExpired(["qemu-system-x86_64", "-kernel"], 120)
    monkeypatch.setattr(m, "measure_vmlinux", host_error)
    got = m.measure_one(bd, kept, "gcc-12", Measure())
    assert got.status == "failed" and got.message.startswith("TimeoutExpired: Command") and "\n" not in got.message

    def missing(*a):
        raise InputError("qemu-system-x86_64 not found: install qemu-system-x86")
    monkeypatch.setattr(m, "measure_vmlinux", missing)
    with pytest.raises(InputError, match="install qemu-system-x86"):
        m.measure_one(bd, kept, "gcc-12", Measure())


def _commit_build(bd: Path, kept: Path, status: str = "ok") -> CommitBuild:
    from toolchains.kbuild import preset
    return CommitBuild(bd.parent, "a" * 40, "gcc-12", "gcc", "gcc-12 1.0", preset("allocator"), None, bd, bd.parent,
                       bd.parent, [TargetResult("vmlinux", "vmlinux", status, "kbuild", "", kept if status == "ok" else None),
                                   TargetResult("mm/page_alloc.o", "object", "ok", "kbuild", "", kept)], 1.0)


def test_the_build_thread_measures_each_built_vmlinux(built, monkeypatch):
    bd, kept = built
    monkeypatch.setattr(m, "measure_vmlinux", lambda *a: runtime())
    assert builder._runtimes(_commit_build(bd, kept), None) == {}           # not asked: not measured
    got = builder._runtimes(_commit_build(bd, kept), Measure((0, 4)))
    assert list(got) == ["vmlinux"] and got["vmlinux"].status == "ok"      # the object target is not measured
    assert builder._runtimes(_commit_build(bd, kept, "failed"), Measure()) == {}
    assert builder._built(_commit_build(bd, kept), None, got).runtimes == got
    # a vmlinux to measure is built in its build dir, never taken from the kept results
    assert builder.options_for(["vmlinux"], Measure()).use_cache is False
    assert builder.options_for(["vmlinux"]).use_cache is True


def test_build_job_passes_it_on_and_the_job_pickles(monkeypatch):
    from ci.pipeline.run import BuildJob, build_job
    from ci.queue.coordinator import job_timeout
    seen = {}
    monkeypatch.setattr(builder, "build", lambda *a, **k: seen.update(k) or "built")
    job = BuildJob("linux-6.1", "/nowhere", Commit("a" * 40), GCC, ("vmlinux",), measure=Measure((0,), 100))
    assert build_job(job) == "built"
    assert seen["measure"] == Measure((0,), 100) and seen["options"].use_cache is False
    assert pickle.loads(pickle.dumps(job)) == job                      # what RQ hands a worker
    assert job_timeout(3600, job) == job_timeout(3600, replace(job, measure=None)) + 120   # RQ's limit has room


def _stored(store, rt: Runtime | None, status: str = "ok") -> int:
    from toolchains.kbuild import preset
    return store.record_build(BuildRecord("linux-6.1", Commit("a" * 40, None, "s"), "gcc-12", "gcc-12 1.0",
                                          ConfigInfo(builder.config_key(preset("allocator"))), "vmlinux", status,
                                          objects=[ObjectRecord("vmlinux")] if status == "ok" else [],
                                          analysis_version=ANALYSIS_VERSION, runtime=rt))


def test_a_stored_build_not_measured_is_built_again_a_failed_measurement_is_not(tmp_path):
    from ci.pipeline.run import BuildJob, missing_targets
    from toolchains.kbuild import preset
    job = BuildJob("linux-6.1", "/nowhere", Commit("a" * 40), GCC, ("vmlinux",), preset("allocator"))
    measured = replace(job, measure=Measure())
    with open_store(tmp_path / "s.db") as store:
        _stored(store, None)
        assert missing_targets(store, job) == []
        assert missing_targets(store, measured) == ["vmlinux"]
        _stored(store, failed())
        assert missing_targets(store, measured) == []
        _stored(store, None, status="failed")                  # a failed build has nothing to measure
        assert missing_targets(store, measured) == []


def test_record_stores_the_measurement_with_its_build(tmp_path, built):
    """``_record`` (what ``store_job`` runs per target, in-process and on a worker) writes the build's
    measurement in the build's own write; this vmlinux has no DWARF, so the build is a failed result
    with the analyzer's line, and its measurement is still kept with it."""
    from ci.pipeline.run import _record
    from toolchains.source import Tree
    bd, kept = built
    done = builder.Built("a" * 40, "gcc-12", "gcc-12 1.0", "gcc", "allocator", "", None, "ok", "kbuild", 1.0, "", [],
                         {"vmlinux": kept}, runtimes={"vmlinux": failed()})
    with open_store(tmp_path / "s.db") as store:
        bid = _record(store, Tree("linux-6.1", tmp_path), Commit("a" * 40, None, "s"), done, "vmlinux")
        b = store.get_build(bid)
        assert b.status == "failed" and b.errors and "\n" not in b.errors[0]
        assert store.runtime_for(bid).to_dict() == failed().to_dict()
        done.runtimes = {}
        bid2 = _record(store, Tree("linux-6.1", tmp_path), Commit("b" * 40, "a" * 40, "s"), done, "vmlinux")
        assert store.runtime_for(bid2) is None


def test_bot_policy_measure():
    from ci.bot.policy import parse_policy
    assert parse_policy("").measure is False
    assert parse_policy('[bot]\nmeasure = true\ntargets = ["vmlinux"]\nconfig = "allocator"\n').measure is True
    with pytest.raises(InputError, match=r"\[bot\]\.measure: measures a built vmlinux"):
        parse_policy("[bot]\nmeasure = true\n")
    with pytest.raises(InputError, match=r"\[bot\]\.measure: expected a bool"):
        parse_policy('[bot]\nmeasure = "yes"\ntargets = ["vmlinux"]\n')

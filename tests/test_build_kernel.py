"""The build layer on the real linux-6.1 tree with real compilers: replay byte-identical to kbuild,
fallbacks to make, failures as results, limits, the sandbox, configs, targets, ccache, the CLI.

Reuses the cached prepared build dirs (gcc-12, clang-19, like the pipeline tests); results go
to per-test directories so each test sees how its own builds were made. Extra commits are made
on top of the example series with git plumbing (no checkout of the 78k-file tree).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from analyzer.elf import load_images
from buildtrees import Listener, commit_on, edit, hostile_lines
from toolchains import presets
from toolchains.build import BuildOptions, build_commit, layout
from toolchains.example import series_commits
from toolchains.kbuild import Config, make_cmd, preset
from toolchains.locks import file_lock
from toolchains.parallel_builds import build_matrix
from toolchains.registry import load

pytestmark = pytest.mark.kernel
PA = "mm/page_alloc.o"
RECURSIVE = """
static __always_inline int sizewatch_depth(int n)
{
	return n > 1 ? sizewatch_depth(n - 1) * n + sizewatch_depth(n - 2) : 1;
}

int sizewatch_use_depth(int n);
int sizewatch_use_depth(int n)
{
	return sizewatch_depth(n);
}
"""


@pytest.fixture(scope="module")
def series():
    """(tree, [base, patch 1, patch 2]) of the example series on linux-6.1."""
    return series_commits()


def func_names(obj: Path) -> set[str]:
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1] for ln in out.splitlines() if len(ln.split()) == 3 and ln.split()[1] in "tT"}


@pytest.mark.parametrize("tc", ["gcc-12", "clang-19"])
def test_replay_is_byte_identical_to_kbuild(series, tmp_path, tc):
    tree, (base, p1, _) = series
    o = BuildOptions(out_root=tmp_path / "auto")
    build_commit(tree, base, tc, [PA], options=o)
    rep = build_commit(tree, p1, tc, [PA], options=o)
    r = rep.targets[0]
    assert (r.method, r.reason) == ("replay", "only mm/page_alloc.c changed among its inputs"), r
    record = (rep.build_dir / "mm/.page_alloc.o.cmd").read_text()
    # kbuild accepts the replayed object and record: make has nothing to do
    before = (rep.build_dir / PA).stat().st_mtime_ns
    lay = layout(tree, tc, Config(), o)
    with file_lock(lay.worktree_lock), file_lock(lay.lock):
        subprocess.run(make_cmd(rep.worktree, rep.build_dir, load(tc), Config(), PA, jobs=2), check=True,
                       capture_output=True)
    assert (rep.build_dir / PA).stat().st_mtime_ns == before
    made = build_commit(tree, p1, tc, [PA], options=replace(o, mode="kbuild", reports=False, use_cache=False,
                                                             out_root=tmp_path / "kbuild"))
    assert made.targets[0].method == "kbuild"
    assert made.targets[0].path.read_bytes() == r.path.read_bytes()       # inline report flags on: same bytes
    assert (made.build_dir / "mm/.page_alloc.o.cmd").read_text() == record
    plain = build_commit(tree, p1, tc, [PA], options=replace(o, mode="replay", reports=False, use_cache=False,
                                                              out_root=tmp_path / "plain"))
    assert plain.targets[0].method == "replay" and plain.targets[0].report is None
    assert plain.targets[0].path.read_bytes() == r.path.read_bytes()
    # the inline report came from that same compile: patch 1 leaves __rmqueue_smallest out of line
    from analyzer.remarks import MISSED, read_remarks
    missed = [x for x in read_remarks(r.report) if x.callee == "__rmqueue_smallest" and x.decision == MISSED]
    assert missed and all(x.compiler == tc.split("-")[0] for x in missed)
    assert "__rmqueue_smallest" in func_names(r.path)


def test_what_changed_decides_how(series, tmp_path):
    tree, (base, p1, _) = series
    o = BuildOptions(out_root=tmp_path, reports=False)
    hdr = commit_on(tree, p1, {"mm/internal.h": edit(tree, p1, "mm/internal.h", "#define __MM_INTERNAL_H\n",
                                                     "#define __MM_INTERNAL_H\n/* sizewatch test */\n")}, "mm: header")
    doc = commit_on(tree, hdr, {"Documentation/mm/index.rst": edit(tree, p1, "Documentation/mm/index.rst", "\n",
                                                                   "\n\n")}, "doc: touch")
    mk = commit_on(tree, doc, {"mm/Makefile": edit(tree, p1, "mm/Makefile", "\n", "\n# sizewatch test\n")}, "mm: Makefile")
    got = {}
    build_commit(tree, p1, "gcc-12", [PA], options=o)
    for name, sha in (("hdr", hdr), ("doc", doc), ("mk", mk)):
        b = build_commit(tree, sha, "gcc-12", [PA], options=o)
        assert b.status == "ok", b.errors
        got[name] = (b.targets[0].method, b.targets[0].reason, b.targets[0].path.read_bytes())
    assert got["hdr"][:2] == ("kbuild", "mm/internal.h changed (an input of the object)")
    assert got["doc"][:2] == ("reused", f"no input changed since {hdr[:12]}")
    assert got["doc"][2] == got["hdr"][2]
    assert got["mk"][:2] == ("kbuild", "mm/Makefile changed (build system)")
    # an object the build dir has never compiled goes through make
    lay = layout(tree, "gcc-12", Config(), o)
    with file_lock(lay.worktree_lock), file_lock(lay.lock):
        for f in ("mm/.mmzone.o.cmd", "mm/.mmzone.o.sizewatch", "mm/mmzone.o"):
            (lay.build_dir / f).unlink(missing_ok=True)
    b = build_commit(tree, mk, "gcc-12", [PA, "mm/mmzone.o"], options=o)
    assert [(t.method, t.reason) for t in b.targets] == [
        ("cached", "built before (kbuild)"), ("kbuild", "no earlier build of mm/mmzone.o in this build dir")]


def test_always_inline_failure_is_a_result(series, tmp_path):
    tree, (_, _, p2) = series
    bad = commit_on(tree, p2, {"mm/page_alloc.c": edit(tree, p2, "mm/page_alloc.c", "\n", "\n") + RECURSIVE},
                    "mm: a recursive __always_inline helper")
    builds = build_matrix(tree, [p2, bad], ["gcc-12", "clang-19"], [PA], options=BuildOptions(out_root=tmp_path))
    res = {(b.sha, b.toolchain): b for b in builds}
    g = res[(bad, "gcc-12")]
    assert g.status == "failed" and g.targets[0].path is None and g.targets[0].method == "replay"
    assert any("error: inlining failed in call to 'always_inline' 'sizewatch_depth': recursive inlining" in e
               for e in g.errors), g.errors
    assert res[(bad, "clang-19")].status == "ok"
    assert "sizewatch_depth" in func_names(res[(bad, "clang-19")].targets[0].path)    # clang: out of line
    assert res[(p2, "gcc-12")].status == "ok" and res[(p2, "clang-19")].status == "ok"
    assert "inlining failed" in g.targets[0].log.read_text()


def test_time_out_and_memory_limit(series, tmp_path):
    tree, (_, p1, _) = series
    o = BuildOptions(out_root=tmp_path / "killed", mode="kbuild", reports=False, use_cache=False)
    t0 = time.monotonic()
    b = build_commit(tree, p1, "gcc-12", [PA], options=replace(o, timeout=2))
    assert time.monotonic() - t0 < 20
    assert b.status == "timeout" and b.targets[0].path is None
    assert not (b.build_dir / PA).exists() and not (b.out_dir / PA).exists()
    b = build_commit(tree, p1, "gcc-12", [PA], options=replace(o, memory=150 << 20))
    assert b.status == "killed" and b.targets[0].path is None, b.targets[0]
    assert b.errors[0].startswith("over the memory limit (150 MiB")
    assert any("virtual memory exhausted" in e or "out of memory" in e for e in b.errors), b.errors
    assert not (b.build_dir / PA).exists()
    # the build dir is sound afterwards, and what it builds is what it built before
    ok = build_commit(tree, p1, "gcc-12", [PA], options=BuildOptions(out_root=tmp_path / "ok", reports=False))
    ref = build_commit(tree, p1, "gcc-12", [PA], options=BuildOptions(reports=False))
    assert ok.status == "ok" and ok.targets[0].path.read_bytes() == ref.targets[0].path.read_bytes()


def test_hostile_makefile_cannot_reach_out(series, tmp_path, monkeypatch):
    tree, (_, p1, _) = series
    listener = Listener()
    tag = uuid.uuid4().hex[:8]
    outside = tmp_path / f"outside-{tag}"
    in_home = Path.home() / f".sizewatch-hostile-{tag}"
    in_tree = tree / ".git" / f"hostile-{tag}"
    listing = f"{tmp_path}/listing-{tag}"
    # what the build sees (the fake tree's probe, on the real tree): in place of home the sandbox's
    # own tmpfs, holding only the cache paths bound into it (the cache lives under $HOME here);
    # a read-only source, no secrets in the environment, no other build dir or worktree
    probe = (f"PROBE_{tag} := $(shell bash -c 'ls -A $$HOME > mm/probe-{tag}.home; "
             f"ls -A $$HOME/.cache/sizewatch $$HOME/.cache/sizewatch/worktrees > mm/probe-{tag}.binds; "
             f"touch $(srctree)/probe-{tag} 2>/dev/null && echo yes > mm/probe-{tag}.src || echo no > mm/probe-{tag}.src; "
             f"env > mm/probe-{tag}.env; ls .. > mm/probe-{tag}.cache')\n")
    mk = edit(tree, p1, "mm/Makefile", "\n", "\n" + hostile_lines(listener.port, [outside, in_home, in_tree], listing)
              + probe)
    hostile = commit_on(tree, p1, {"mm/Makefile": mk}, f"mm: hostile Makefile {tag}")
    (Path.home() / f".sizewatch-visible-{tag}").write_text("x")
    monkeypatch.setenv("SIZEWATCH_BOT_TOKEN", f"token-{tag}")
    probes: list[Path] = []
    try:
        b = build_commit(tree, hostile, "gcc-12", [PA], options=BuildOptions(out_root=tmp_path / "s", reports=False))
        assert b.status == "ok" and b.targets[0].method == "kbuild"
        probes = [b.build_dir / "mm" / f"probe-{tag}.{k}" for k in ("home", "binds", "src", "env", "cache")]
        home, binds, src, env, cache = (p.read_text() for p in probes)
        from toolchains.source import cache_dir
        if cache_dir().resolve().is_relative_to(Path.home()):
            # the hostile lines' own write to $HOME landed in the sandbox's tmpfs (not in the real home)
            assert sorted(home.split()) == [".cache", f".sizewatch-hostile-{tag}"], home
            assert binds.split() == [f"{cache_dir()}:", "build", "linux-6.1", "worktrees",
                                     f"{cache_dir()}/worktrees:", b.worktree.name], binds
        else:
            assert home.split() == [f".sizewatch-hostile-{tag}"], home
        assert src.strip() == "no"
        assert f"token-{tag}" not in env and "PATH=" in env
        assert cache.split() == [b.build_dir.name]             # the other toolchains' build dirs: hidden
        assert not (b.worktree / f"probe-{tag}").exists()
        probes.append(b.worktree / f"probe-{tag}")               # the unsandboxed control writes it
        assert listener.count() == 0
        for m in (outside, in_home, in_tree, Path(listing + ".env")):
            assert not m.exists(), m
        # control: without the sandbox the same commit does reach out (so the lines above do run)
        b = build_commit(tree, hostile, "gcc-12", [PA],
                         options=BuildOptions(out_root=tmp_path / "o", reports=False, sandbox=False, mode="kbuild"))
        assert b.status == "ok"
        assert listener.count() >= 1 and outside.exists() and in_home.exists()
    finally:
        listener.close()
        for m in (in_home, in_tree, Path.home() / f".sizewatch-visible-{tag}", *probes):
            m.unlink(missing_ok=True)


def test_tinyconfig(series, tmp_path):
    tree, (base, _, _) = series
    cfg = preset("tinyconfig")
    b = build_commit(tree, base, "gcc-12", [PA], cfg, options=BuildOptions(out_root=tmp_path))
    assert b.status == "ok", b.errors
    text = (b.build_dir / ".config").read_text()
    for line in ("CONFIG_64BIT=y", "CONFIG_DEBUG_INFO_DWARF5=y", "# CONFIG_SMP is not set"):
        assert line in text.splitlines(), line
    assert len(load_images(b.targets[0].path)) == 1
    from elftools.elf.elffile import ELFFile
    with open(b.targets[0].path, "rb") as f:
        elf = ELFFile(f)
        assert elf.elfclass == 64
        cu = next(elf.get_dwarf_info().iter_CUs())
        assert cu.header["version"] == 5
    assert b.build_dir.name == f"gcc-12-{cfg.key}" and cfg.key.startswith("tinyconfig-")


@pytest.mark.parametrize("name", presets.names())
def test_every_named_config_compiles_at_O2(series, name):
    """Every named config builds mm/page_alloc.o at -O2, as every distro kernel does: its built
    .config says CC_OPTIMIZE_FOR_PERFORMANCE and kbuild's own record of the compile command
    (mm/.page_alloc.o.cmd) has -O2 and no -Os. tinyconfig selects -Os; the allocator config
    inherited it unnoticed once, and every allocator result showed -Os inlining."""
    tree, (base, _, _) = series
    b = build_commit(tree, base, "gcc-12", [PA], preset(name), options=BuildOptions(reports=False))
    assert b.status == "ok", b.errors
    config = (b.build_dir / ".config").read_text().splitlines()
    assert "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y" in config, name
    assert "# CONFIG_CC_OPTIMIZE_FOR_SIZE is not set" in config, name
    cmd = (b.build_dir / "mm" / ".page_alloc.o.cmd").read_text().splitlines()[0]
    assert cmd.startswith("cmd_mm/page_alloc.o :="), cmd[:80]
    flags = cmd.split()
    assert "-O2" in flags and "-Os" not in flags, (name, [f for f in flags if f.startswith("-O")])


def test_directory_target(series, tmp_path, sizediff, bloat_o_meter):
    tree, (base, p1, _) = series
    builds = build_matrix(tree, [base, p1], ["gcc-12"], ["lib/math/"], options=BuildOptions(out_root=tmp_path))
    for b in builds:
        (t,) = b.targets
        assert t.ok and t.path == b.out_dir / "lib/math/built-in.a" and t.method == "kbuild"
        for member in ("gcd.o", "lcm.o", "int_sqrt.o", "rational.o"):
            assert (b.out_dir / "lib/math" / member).exists(), member
    from test_sizediff import MODES, assert_same_as_oracle
    old, new = builds[0].targets[0].path, builds[1].targets[0].path
    for mode in MODES:                    # kbuild's thin archive, as bloat-o-meter reads it
        assert_same_as_oracle(sizediff, bloat_o_meter, old, new, *mode)
    d = sizediff(old, new)
    assert d.returncode == 0 and b"int_sqrt" not in d.stdout and b"Total: Before=" in d.stdout
    from analyzer.bloat import read_symbols
    assert read_symbols(builds[1].targets[0].path)


def test_ccache_gives_the_same_objects(series, tmp_path):
    tree, (_, p1, _) = series
    o = BuildOptions(out_root=tmp_path / "c1", ccache=True, mode="kbuild", reports=False, use_cache=False)
    first = build_commit(tree, p1, "gcc-12", [PA], options=o)
    second = build_commit(tree, p1, "gcc-12", [PA], options=replace(o, out_root=tmp_path / "c2"))
    ref = build_commit(tree, p1, "gcc-12", [PA], options=BuildOptions(reports=False))
    assert first.status == second.status == "ok"
    assert first.targets[0].path.read_bytes() == ref.targets[0].path.read_bytes()
    assert second.targets[0].path.read_bytes() == ref.targets[0].path.read_bytes()
    store = layout(tree, "gcc-12", Config(), o).ccache_dir / "store"
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                           env={**os.environ, "CCACHE_DIR": str(store)}).stdout
    got = dict(line.split("\t") for line in stats.splitlines() if "\t" in line)
    assert int(got.get("direct_cache_hit", 0)) + int(got.get("preprocessed_cache_hit", 0)) >= 1, stats
    assert second.targets[0].seconds < first.targets[0].seconds or int(got.get("direct_cache_hit", 0)) >= 2


def sizewatch(*args) -> subprocess.CompletedProcess:
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "cli"]
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, timeout=900)


def test_cli_build_on_the_example_series(series, example_series):
    tree, (base, p1, p2) = series
    for tc in ("gcc-12", "clang-19"):
        example_series(tc)                    # built once per run (conftest): the CLI finds them kept
    p = sizewatch("build", "--commits", f"{base}..{p2}", "--toolchains", "gcc-12,clang-19", "--targets", PA)
    assert p.returncode == 0, p.stderr
    heads = [ln for ln in p.stdout.splitlines() if ln and not ln.startswith(" ")]
    assert [h.split()[:2] for h in heads] == [[tc, sha[:12]] for sha in (base, p1, p2) for tc in ("gcc-12", "clang-19")]
    paths = [ln.split(None, 1) for ln in p.stdout.splitlines() if ln.startswith("    ")]
    assert {k for k, _ in paths} == {"object", "report", "log"}
    for _, path in paths:
        assert Path(path).exists(), path
    for tc, objs in (("gcc-12", example_series("gcc-12")), ("clang-19", example_series("clang-19"))):
        for o in objs:
            assert f"    object  {o.object_path}" in p.stdout


@pytest.mark.slow
@pytest.mark.timeout(3600)          # five toolchains prepared from scratch on an empty cache
def test_example_series_under_the_installed_matrix(series, tmp_path):
    """The seed's experiment under every installed compiler of the default matrix: patch 1 pushes
    __rmqueue_smallest out of line, patch 2 (__always_inline) brings it back in."""
    tree, shas = series
    matrix = [t for t in ("gcc-11", "gcc-12", "clang-14", "clang-16", "clang-19") if load(t).installed]
    assert len(matrix) == 5, "scripts/install.sh installs the five"
    builds = build_matrix(tree, shas, matrix, [PA], options=BuildOptions(out_root=tmp_path))
    assert len(builds) == 15 and all(b.status == "ok" for b in builds), [b.summary() for b in builds if b.status != "ok"]
    by = {(b.sha, b.toolchain): b.targets[0] for b in builds}
    for tc in matrix:
        assert by[(shas[1], tc)].method == by[(shas[2], tc)].method == "replay"
        assert "__rmqueue_smallest" in func_names(by[(shas[1], tc)].path), tc
        assert "__rmqueue_smallest" not in func_names(by[(shas[2], tc)].path), tc
        assert "__rmqueue_smallest" in by[(shas[1], tc)].report.read_text(), tc
        assert by[(shas[1], tc)].path.read_bytes() != by[(shas[0], tc)].path.read_bytes()


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_allocator_vmlinux(series):
    """The ``allocator`` vmlinux (tinyconfig + what mm/page_alloc.c needs, modules) the oracle tests
    compare (tests/kernel_images.py: built once into the cache, ~3.5 min idle, so every later run
    and test takes it from there); every option the config asks for is on in its .config."""
    from kernel_images import CONFIG, tiny_vmlinux
    tree, (base, _, _) = series
    images = tiny_vmlinux()
    b = build_commit(tree, base, "gcc-12", ["vmlinux"], CONFIG, options=BuildOptions(reports=False, jobs=2))
    assert b.status == "ok" and b.targets[0].method == "cached", b.errors
    v = b.targets[0].path
    assert v == b.out_dir / "vmlinux" == images.vmlinux[0] and v.stat().st_size > 1_000_000
    names = func_names(v)
    assert "start_kernel" in names and "__alloc_pages" in names
    have = set((b.build_dir / ".config").read_text().splitlines())
    assert set(CONFIG.fragment) <= have and CONFIG.key.startswith("allocator-")


# --- decisions made on the fake tree, re-checked on linux-6.1 (the cheap ones: no extra kbuild) ---

def test_second_run_compiles_nothing_on_the_real_tree(series, example_series, monkeypatch):
    """The example series, built once per run (conftest), asked for again under both toolchains:
    every result comes from the cache and no process is started (no make, no git checkout)."""
    tree, shas = series
    for tc in ("gcc-12", "clang-19"):
        example_series(tc)
    import toolchains.process as tp
    started: list[list[str]] = []
    real_run = tp.run
    monkeypatch.setattr(tp, "run", lambda argv, *a, **kw: started.append(argv) or real_run(argv, *a, **kw))
    builds = build_matrix(tree, shas, ["gcc-12", "clang-19"], [PA])
    assert [(b.sha, b.toolchain) for b in builds] == [(s, t) for s in shas for t in ("gcc-12", "clang-19")]
    assert {b.targets[0].method for b in builds} == {"cached"} and started == []
    for tc in ("gcc-12", "clang-19"):
        assert [b.targets[0].path for b in builds if b.toolchain == tc] == \
            [x.object_path for x in example_series(tc)]


def test_cli_bad_input_on_the_real_tree(series, tmp_path):
    """The fake tree's bad-input cases against linux-6.1: one line, exit 1, before any build."""
    tree, (base, _, _) = series
    env = {**os.environ, "SIZEWATCH_CACHE": str(tmp_path / "cache")}
    cases = [
        (("--commits", "deadbeef"), "unknown revision"),
        (("--commits", base, "--toolchains", "gcc-99"), "unknown toolchain"),
        (("--commits", base, "--targets", "../etc/passwd"), "bad target"),
        (("--commits", base, "--targets", "mm/page_alloc.c"), "bad target"),
        (("--commits", base, "--memory", "lots"), "bad --memory"),
        (("--commits", base, "--fragment", tmp_path / "nope.config"), "nope.config"),
    ]
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "cli"]
    for args, msg in cases:
        p = subprocess.run([*cmd, "build", "--tree", str(tree), *map(str, args)], capture_output=True, text=True,
                           env=env, timeout=300)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith("sizewatch: ") and msg in lines[0], \
            (args, p.stderr)
    assert not (tmp_path / "cache" / "build").exists()           # nothing was prepared or built


def test_linked_cache_and_two_builds_of_one_commit_at_once(series, example_series, tmp_path):
    """The shared cache reached through a symlink (the sandbox must bind real paths), with two
    callers asking for the same commit at once: one builds patch 2 in the real build dir, the
    other waits for it and takes its result; the object is the one kept for the series."""
    import threading
    tree, (_, _, p2) = series
    want = example_series("gcc-12")[2].object_path.read_bytes()
    from toolchains.source import cache_dir
    (tmp_path / "link").symlink_to(cache_dir())
    o = BuildOptions(cache=tmp_path / "link", out_root=tmp_path / "out", reports=False)
    got = []
    threads = [threading.Thread(target=lambda: got.append(build_commit(tree, p2, "gcc-12", [PA], options=o)))
               for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [b.status for b in got] == ["ok", "ok"], [b.errors for b in got]
    # one compiled (replay or make: that depends on what the shared build dir last built), one waited
    methods = sorted(b.targets[0].method for b in got)
    assert methods[0] == "cached" and methods[1] != "cached", methods
    assert got[0].targets[0].path == got[1].targets[0].path
    assert got[0].targets[0].path.read_bytes() == want

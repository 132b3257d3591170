"""The build orchestration (toolchains.build / matrix / sandbox) on a fake kernel tree
(tests/fakekernel: a Makefile with kbuild's interface, real compilers): fast, so every
decision is checked here; tests/test_build_kernel.py checks each again on linux-6.1."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from buildtrees import Listener, commit_on, edit, fake_tree, hostile_lines
from toolchains.build import BuildOptions, build_commit
from toolchains.errors import BuildError
from toolchains.kbuild import Config, preset
from toolchains.parallel_builds import build_matrix
from toolchains.progress import MatrixProgress

ROOT = Path(__file__).resolve().parent.parent
RECURSIVE = """
static __attribute__((always_inline)) inline int depth(int n)
{
	return n > 1 ? depth(n - 1) * n + depth(n - 2) : 1;	/* not a tail call: gcc cannot inline it */
}

int use_depth(int n)
{
	return depth(n);
}
"""


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    """The fake tree and its commits: base, a source change, a header change, an unrelated file,
    a Makefile change, a new object, an always_inline recursion (gcc refuses it)."""
    root = tmp_path_factory.mktemp("fake")
    tree, base = fake_tree(root / "linux-fake")
    c = {"base": base}
    c["src"] = commit_on(tree, base, {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1", "* 5 + 2")},
                         "mm: change alloc_pages")
    c["hdr"] = commit_on(tree, c["src"], {"include/linux/gfp.h": edit(tree, base, "include/linux/gfp.h", "0x10u", "0x20u")},
                         "gfp: change GFP_KERNEL")
    c["other"] = commit_on(tree, c["hdr"], {"kernel/fork.c": edit(tree, base, "kernel/fork.c", "return 1;", "return 2;")},
                           "fork: unrelated change")
    c["make"] = commit_on(tree, c["other"], {"Makefile": edit(tree, base, "Makefile", "LD := ld", "LD := ld\n# a comment")},
                          "kbuild: touch the Makefile")
    c["new"] = commit_on(tree, c["make"], {"mm/new.c": "int new_thing(void) { return 7; }\n"}, "mm: a new object")
    c["recursive"] = commit_on(tree, c["new"], {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1", "* 5 + 2")
                                                + RECURSIVE}, "mm: always_inline recursion")
    return tree, c, root


def opts(root: Path, **kw) -> BuildOptions:
    return BuildOptions(cache=root / "cache", **kw)


def counts(b) -> tuple[int, int]:
    """(compiles, make runs) the fake tree has recorded in this build dir so far."""
    def n(name):
        p = b.build_dir / name
        return len(p.read_text().splitlines()) if p.exists() else 0
    return n(".fake-compiles"), n(".fake-makes")


def test_methods_follow_what_changed(fake, tmp_path):
    tree, c, _ = fake
    o = opts(tmp_path)
    seen = {}
    for name in ("base", "src", "hdr", "other", "make"):
        b = build_commit(tree, c[name], "gcc-12", ["mm/page_alloc.o"], options=o)
        r = b.targets[0]
        assert r.ok and r.path.exists() and r.report.exists() and r.log.exists(), (name, r)
        seen[name] = (r.method, r.reason, counts(b))
    assert seen["base"][0] == "kbuild"
    assert seen["src"][:2] == ("replay", "only mm/page_alloc.c changed among its inputs")
    assert seen["src"][2][1] == seen["base"][2][1]                  # no make ran for the replay...
    assert seen["src"][2][0] == seen["base"][2][0] + 1              # ...one compile, the report in it
    assert seen["hdr"][:2] == ("kbuild", "include/linux/gfp.h changed (an input of the object)")
    assert seen["other"][:2] == ("reused", f"no input changed since {c['hdr'][:12]}")
    assert seen["other"][2] == seen["hdr"][2]                       # nothing compiled, nothing made
    assert seen["make"][:2] == ("kbuild", "Makefile changed (build system)")
    b = build_commit(tree, c["new"], "gcc-12", ["mm/page_alloc.o", "mm/new.o"], options=o)
    assert [(r.method, r.reason) for r in b.targets] == [
        ("reused", f"no input changed since {c['make'][:12]}"),
        ("kbuild", "no earlier build of mm/new.o in this build dir")]
    # the reused object is the earlier commit's bytes; the report is kept beside it
    prev = build_commit(tree, c["hdr"], "gcc-12", ["mm/page_alloc.o"], options=o).targets[0]
    got = build_commit(tree, c["other"], "gcc-12", ["mm/page_alloc.o"], options=o).targets[0]
    assert got.method == "cached" and got.path.read_bytes() == prev.path.read_bytes()
    assert got.report.read_text() == prev.report.read_text()


@pytest.mark.parametrize("tc", ["gcc-12", "clang-19"])
def test_replay_is_byte_identical_to_make(fake, tmp_path, tc):
    tree, c, _ = fake
    o = opts(tmp_path)
    build_commit(tree, c["base"], tc, ["mm/page_alloc.o"], options=o)
    rep = build_commit(tree, c["src"], tc, ["mm/page_alloc.o"], options=o)
    assert rep.targets[0].method == "replay"
    record_after_replay = (rep.build_dir / "mm/.page_alloc.o.cmd").read_text()
    made = build_commit(tree, c["src"], tc, ["mm/page_alloc.o"],
                        options=replace(o, mode="kbuild", use_cache=False, out_root=tmp_path / "made"))
    assert made.targets[0].method == "kbuild"
    assert made.targets[0].path.read_bytes() == rep.targets[0].path.read_bytes()
    assert (made.build_dir / "mm/.page_alloc.o.cmd").read_text() == record_after_replay
    plain = build_commit(tree, c["src"], tc, ["mm/page_alloc.o"],
                         options=replace(o, mode="replay", reports=False, use_cache=False, out_root=tmp_path / "plain"))
    assert plain.targets[0].method == "replay" and plain.targets[0].report is None
    assert plain.targets[0].path.read_bytes() == rep.targets[0].path.read_bytes()
    text = rep.targets[0].report.read_text()
    # the one decision the fake page_alloc.c has: rmqueue_smallest inlined into alloc_pages
    if tc.startswith("gcc"):
        import re
        assert re.fullmatch(r"\S+/mm/page_alloc\.c:15:9: optimized:  Inlining rmqueue_smallest/\d+ into "
                            r"alloc_pages/\d+\.\n", text), text
    else:
        import yaml
        docs = [(d.tag, d.value) for d in yaml.compose_all(text)]
        assert [t for t, _ in docs] == ["!Passed"], text
        got = {k.value: v for k, v in docs[0][1] if k.value in ("Pass", "Name", "Function")}
        assert {k: v.value for k, v in got.items()} == {"Pass": "inline", "Name": "Inlined", "Function": "alloc_pages"}
        assert "Callee:          rmqueue_smallest" in text and "Caller:          alloc_pages" in text


def test_second_run_compiles_nothing(fake, tmp_path):
    tree, c, _ = fake
    o = opts(tmp_path)
    shas = [c[k] for k in ("base", "src", "hdr", "other")]
    first = build_matrix(tree, shas, ["gcc-12", "clang-19"], ["mm/page_alloc.o"], options=o)
    before = {b.toolchain: counts(b) for b in first}
    again = build_matrix(tree, shas, ["gcc-12", "clang-19"], ["mm/page_alloc.o"], options=o)
    assert {b.method for b in again} == {"cached"}
    assert {b.toolchain: counts(b) for b in again} == before
    assert [b.targets[0].path for b in again] == [b.targets[0].path for b in first]


def test_matrix_runs_toolchains_in_parallel_with_progress(fake, tmp_path):
    tree, c, _ = fake
    shas = [c[k] for k in ("base", "src", "hdr", "other", "make")]
    spans: dict[tuple, list[float]] = {}

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=160, record=True)
    with MatrixProgress(len(shas) * 2, console=console) as progress:
        def events(e):
            progress.events(e)
            spans.setdefault((e.toolchain, e.sha), []).append(time.monotonic())
        builds = build_matrix(tree, shas, ["gcc-12", "clang-19"], ["mm/page_alloc.o"], options=opts(tmp_path),
                              events=events, on_build=progress.on_build, parallel=2)
    assert [(b.sha, b.toolchain) for b in builds] == [(s, t) for s in shas for t in ("gcc-12", "clang-19")]
    assert all(b.status == "ok" for b in builds)
    # both toolchains were busy at the same time
    by_tc = {tc: (min(v[0] for k, v in spans.items() if k[0] == tc), max(v[-1] for k, v in spans.items() if k[0] == tc))
             for tc in ("gcc-12", "clang-19")}
    assert by_tc["gcc-12"][0] < by_tc["clang-19"][1] and by_tc["clang-19"][0] < by_tc["gcc-12"][1]
    out = console.export_text()
    for b in builds:                    # one summary line per build
        assert f"{b.toolchain:9} {b.sha[:12]} mm/page_alloc.o ok ({b.targets[0].method}," in out
    table = Console(file=io.StringIO(), width=160)
    progress.running[("gcc-12", shas[1], "mm/page_alloc.o")] = ("replay", time.monotonic() - 2.5)
    table.print(progress.__rich__())
    shown = table.file.getvalue()
    assert "toolchain" in shown and "elapsed" in shown and f"{shas[1][:12]}" in shown and "2.5 s" in shown


def test_failure_is_a_result_and_the_others_go_on(fake, tmp_path):
    tree, c, _ = fake
    o = opts(tmp_path)
    shas = [c["base"], c["recursive"], c["src"]]
    builds = build_matrix(tree, shas, ["gcc-12", "clang-19"], ["mm/page_alloc.o"], options=o)
    res = {(b.sha, b.toolchain): b for b in builds}
    bad = res[(c["recursive"], "gcc-12")]
    assert bad.status == "failed" and bad.targets[0].path is None
    # gcc's own error lines, at depth()'s declaration in the build's worktree: one per recursive call
    # (its "called from here" notes are not errors)
    want = (f"{bad.worktree}/mm/page_alloc.c:18:50: error: inlining failed in call to 'always_inline' 'depth': "
            "recursive inlining")
    assert bad.errors == [want, want], bad.errors
    assert res[(c["recursive"], "clang-19")].status == "ok"          # clang makes an out-of-line copy
    assert res[(c["src"], "gcc-12")].status == "ok"                   # and gcc goes on with the next commit
    assert not (bad.out_dir / "mm/page_alloc.o").exists()
    # the failure is kept as a result: asking again compiles nothing and gives the same errors
    n = counts(bad)
    again = build_commit(tree, c["recursive"], "gcc-12", ["mm/page_alloc.o"], options=o)
    assert again.status == "failed" and again.method == "cached" and again.errors == bad.errors
    assert counts(again) == n


def _sessions_alive(sids: set[int]) -> list[str]:
    """Processes still in one of these sessions (the process groups the build steps were started in)."""
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sids:          # field 6 of proc(5): session id
            left.append(stat.parent.name)
    return left


def test_timeout_kills_the_build_and_leaves_no_object(fake, tmp_path, monkeypatch):
    tree, c, root = fake
    import toolchains.process as tp
    started: set[int] = set()
    real_popen = tp.subprocess.Popen

    class Recording(real_popen):            # the real Popen; only notes each step's session leader
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            if kw.get("start_new_session"):
                started.add(self.pid)
    monkeypatch.setattr(tp.subprocess, "Popen", Recording)
    # this build's own hanging command: a sleep whose argument no other process on the (shared)
    # machine has, started after it leaves a mark in the build dir (so the test knows it ran)
    tag = f"60.{uuid.uuid4().int % 10**9:09d}"
    slow = commit_on(tree, c["base"], {"Makefile": edit(tree, c["base"], "Makefile", "./tools/objtool/objtool $@",
                                                          f"touch $@.hang-started ; sleep {tag} ; ./tools/objtool/objtool $@")},
                     "kbuild: a compile that hangs after writing the object")
    o = opts(tmp_path, timeout=3)
    t0 = time.monotonic()
    b = build_commit(tree, slow, "gcc-12", ["mm/page_alloc.o"], options=o)
    assert time.monotonic() - t0 < 30
    r = b.targets[0]
    assert r.status == "timeout" and r.path is None and r.errors
    assert (b.build_dir / "mm/page_alloc.o.hang-started").exists()      # the hang was reached
    assert not (b.build_dir / "mm/page_alloc.o").exists()       # the un-objtool'd object is gone
    assert not (b.out_dir / "mm/page_alloc.o").exists()
    assert not list(b.out_dir.rglob("*.tmp"))
    left = subprocess.run(["pgrep", "-af", f"sleep {tag}"], capture_output=True, text=True)
    assert left.returncode == 1, left.stdout                    # nothing of this build's is left running
    assert started and not _sessions_alive(started)
    monkeypatch.undo()
    # a time-out is not kept as a result; the next build in the same dir is sound
    b2 = build_commit(tree, c["base"], "gcc-12", ["mm/page_alloc.o"], options=replace(o, timeout=120))
    assert b2.status == "ok" and b2.targets[0].method == "kbuild"


def test_memory_limit(fake, tmp_path):
    tree, c, _ = fake
    b = build_commit(tree, c["base"], "gcc-12", ["mm/page_alloc.o"], options=opts(tmp_path, memory=40 << 20))
    r = b.targets[0]
    assert r.status == "killed" and r.path is None, r
    assert any("memory" in e.lower() for e in r.errors), r.errors


def test_hostile_makefile_is_contained(fake, tmp_path, monkeypatch):
    tree, c, root = fake
    listener = Listener()
    tag = uuid.uuid4().hex[:8]
    outside = tmp_path / f"outside-{tag}"
    in_home = Path.home() / f".sizewatch-hostile-{tag}"
    in_tree = tree / f"hostile-{tag}"
    o = opts(tmp_path / "sandboxed")
    listing = f"{tmp_path}/listing-{tag}"
    hostile = commit_on(tree, c["base"], {"Makefile": edit(tree, c["base"], "Makefile", "LD := ld\n",
                        "LD := ld\n" + hostile_lines(listener.port, [outside, in_home, in_tree], listing))},
                        "kbuild: hostile")
    monkeypatch.setenv("SIZEWATCH_SMTP_PASSWORD", f"secret-{tag}")
    try:
        b = build_commit(tree, hostile, "gcc-12", ["mm/page_alloc.o"], options=o)
        assert b.status == "ok"                          # the build itself still works
        assert listener.count() == 0
        for m in (outside, in_home, in_tree, Path(listing + ".env")):
            assert not m.exists(), m
        # control: the same commit without the sandbox does reach the listener and write outside
        b = build_commit(tree, hostile, "gcc-12", ["mm/page_alloc.o"],
                         options=opts(tmp_path / "open", sandbox=False, use_cache=False))
        assert b.status == "ok"
        assert listener.count() >= 1
        assert outside.exists() and in_home.exists()
        env = Path(listing + ".env").read_text()
        assert f"secret-{tag}" not in env                # even unsandboxed, builds get a clean environment
    finally:
        listener.close()
        in_home.unlink(missing_ok=True)
        in_tree.unlink(missing_ok=True)


def test_sandbox_hides_home_and_secrets(fake, tmp_path, monkeypatch):
    """What a build sees: its build dir writable, the source read-only, no home, no store, no env."""
    tree, c, root = fake
    tag = uuid.uuid4().hex[:8]
    probe = ("PROBE := $(shell bash -c 'ls -A $$HOME | wc -l > $(O)/probe.home; "
             "touch $(srctree)/probe 2>/dev/null && echo yes > $(O)/probe.src || echo no > $(O)/probe.src; "
             "env > $(O)/probe.env; ls $(O)/.. > $(O)/probe.cache')\n")
    probed = commit_on(tree, c["base"], {"Makefile": edit(tree, c["base"], "Makefile", "LD := ld\n", "LD := ld\n" + probe)},
                       "kbuild: probe")
    (Path.home() / f".sizewatch-visible-{tag}").write_text("x")
    monkeypatch.setenv("SIZEWATCH_BOT_TOKEN", f"token-{tag}")
    try:
        b = build_commit(tree, probed, "gcc-12", ["mm/page_alloc.o"], options=opts(tmp_path))
    finally:
        (Path.home() / f".sizewatch-visible-{tag}").unlink()
    assert b.status == "ok"
    bd = b.build_dir
    assert (bd / "probe.home").read_text().strip() == "0"
    assert (bd / "probe.src").read_text().strip() == "no"
    env = (bd / "probe.env").read_text()
    assert f"token-{tag}" not in env and "PATH=" in env
    assert (bd / "probe.cache").read_text().split() == [bd.name]       # other build dirs: hidden


def test_ccache_is_optional_and_off_by_default(fake, tmp_path):
    tree, c, _ = fake
    assert BuildOptions().ccache is False
    plain = build_commit(tree, c["base"], "gcc-12", ["mm/page_alloc.o"], options=opts(tmp_path, reports=False))
    assert not (tmp_path / "cache" / "ccache").exists()
    o = opts(tmp_path, ccache=True, reports=False, mode="kbuild", out_root=tmp_path / "ccached", use_cache=False)
    first = build_commit(tree, c["base"], "gcc-12", ["mm/page_alloc.o"], options=o)
    second = build_commit(tree, c["base"], "gcc-12", ["mm/page_alloc.o"], options=replace(o, use_cache=False))
    assert first.targets[0].path.read_bytes() == plain.targets[0].path.read_bytes()
    assert second.targets[0].path.read_bytes() == plain.targets[0].path.read_bytes()
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                           env={**os.environ, "CCACHE_DIR": str(tmp_path / "cache" / "ccache" / "store")}).stdout
    got = dict(line.split("\t") for line in stats.splitlines() if "\t" in line)
    assert int(got.get("direct_cache_hit", 0)) + int(got.get("preprocessed_cache_hit", 0)) >= 1, stats
    # the command line kbuild recorded is the same as without ccache (masquerade mode)
    cmd = (first.build_dir / "mm/.page_alloc.o.cmd").read_text().splitlines()[0].split(" := ", 1)[1]
    assert cmd.startswith("./scripts/cc-wrapper gcc-12 -Wp,-MMD,")


def test_directory_and_vmlinux_targets(fake, tmp_path, sizediff, bloat_o_meter):
    tree, c, _ = fake
    o = opts(tmp_path)
    b = build_matrix(tree, [c["base"], c["src"]], ["gcc-12"], ["mm/", "vmlinux"], options=o)
    for x in b:
        d, v = x.targets
        assert d.ok and d.path == x.out_dir / "mm/built-in.a" and (x.out_dir / "mm/slab.o").exists()
        assert v.ok and v.path == x.out_dir / "vmlinux" and v.method == "kbuild"
    from test_sizediff import MODES, assert_same_as_oracle
    for i in (0, 1):                 # the archives, then the linked images: bloat-o-meter's tables
        old, new = b[0].targets[i].path, b[1].targets[i].path
        for mode in MODES:
            assert_same_as_oracle(sizediff, bloat_o_meter, old, new, *mode)


def test_tinyconfig_preset(fake, tmp_path):
    tree, c, _ = fake
    cfg = preset("tinyconfig")
    assert cfg.base == "tinyconfig" and "CONFIG_64BIT=y" in cfg.fragment and cfg.key != Config().key
    b = build_commit(tree, c["base"], "gcc-12", ["kernel/fork.o"], cfg, options=opts(tmp_path))
    assert b.status == "ok"
    text = (b.build_dir / ".config").read_text()
    assert "CONFIG_DEBUG_INFO_DWARF5=y" in text and "# CONFIG_FAKE_SMP is not set" in text
    with pytest.raises(BuildError, match="unknown config"):
        preset("allmodconfig")


def sizewatch(*args, env=None) -> subprocess.CompletedProcess:
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "cli"]
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=600)


def test_cli_build_prints_where_everything_went(fake, tmp_path):
    tree, c, _ = fake
    env = {"SIZEWATCH_CACHE": str(tmp_path / "cache")}
    p = sizewatch("build", "--tree", tree, "--commits", f"{c['base']}..{c['hdr']}", "--toolchains",
                  "gcc-12,clang-19", "--targets", "mm/page_alloc.o", env=env)
    assert p.returncode == 0, p.stderr
    blocks = p.stdout.split("\n")
    heads = [ln for ln in blocks if not ln.startswith(" ")  and ln]
    assert len(heads) == 6                                   # 3 commits × 2 toolchains
    for ln in blocks:
        if ln.startswith("    ") and ln.split()[0] in ("object", "report", "log"):
            assert Path(ln.split(None, 1)[1]).exists(), ln
    assert sum(ln.strip().startswith("report ") for ln in blocks) == 6
    assert "replay: only mm/page_alloc.c changed" in p.stdout
    assert len([ln for ln in p.stderr.splitlines() if " mm/page_alloc.o ok (" in ln]) == 6   # one line per build
    js = sizewatch("build", "--tree", tree, "--commits", c["src"], "--toolchains", "gcc-12", "--json", env=env)
    (doc,) = json.loads(js.stdout)
    assert doc["targets"][0]["method"] == "cached" and doc["compiler_version"].startswith("gcc-12 ")
    bad = sizewatch("build", "--tree", tree, "--commits", c["recursive"], "--toolchains", "gcc-12", env=env)
    assert bad.returncode == 2 and "inlining failed in call to 'always_inline'" in bad.stdout


def test_cli_bad_input_is_one_line(fake, tmp_path):
    tree, c, _ = fake
    env = {"SIZEWATCH_CACHE": str(tmp_path / "cache")}
    cases = [
        (("--commits", "deadbeef"), "unknown revision"),
        (("--commits", c["base"], "--toolchains", "gcc-99"), "unknown toolchain"),
        (("--commits", c["base"], "--targets", "../etc/passwd"), "bad target"),
        (("--commits", c["base"], "--targets", "mm/page_alloc.c"), "bad target"),
        (("--series", tmp_path / "missing.mbox"), "no such mbox"),
        ((), "give either --commits"),
        (("--commits", c["base"], "--memory", "lots"), "bad --memory"),
        (("--commits", c["base"], "--fragment", tmp_path / "nope.config"), "nope.config"),
    ]
    for args, msg in cases:
        p = sizewatch("build", "--tree", tree, *args, env=env)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith("sizewatch: ") and msg in lines[0], \
            (args, p.stderr)
    p = sizewatch("build", "--tree", tmp_path, "--commits", "HEAD", env=env)
    assert p.returncode == 1 and "not a git tree" in p.stderr


def test_toolchains_command_lists_the_registry(tmp_path):
    from toolchains.registry import all_toolchains
    p = sizewatch("toolchains")
    assert p.returncode == 0, p.stderr
    rows = {ln.split()[0]: ln for ln in p.stdout.splitlines()[1:]}
    assert set(rows) == {"gcc-11", "gcc-12", "clang-13", "clang-14", "clang-15", "clang-16", "clang-19", "clang-22"}
    for tc in all_toolchains():
        if shutil.which(tc.compiler):
            want = subprocess.run([tc.compiler, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
            assert rows[tc.name].split()[1] == "installed" and want.strip() in rows[tc.name]
        else:
            assert rows[tc.name].split()[1] == "missing"
    assert "(bookworm-security)" in rows["clang-22"]
    js = json.loads(sizewatch("toolchains", "--json").stdout)
    assert {d["name"]: d["installed"] for d in js}["gcc-12"] is True
    bad = sizewatch("toolchains", "install", "gcc-99")
    assert bad.returncode == 1 and bad.stderr.strip().startswith("sizewatch: unknown toolchain 'gcc-99'")


@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get needs root")
def test_toolchains_install_goes_through_apt():
    """Installing what is installed already is apt's no-op: the real apt-get runs, nothing is fetched."""
    p = sizewatch("toolchains", "install", "gcc-12")
    assert p.returncode == 0, p.stderr
    assert "apt-get install -y -q --no-install-recommends gcc-12" in p.stderr
    assert p.stdout.split()[:2] == ["gcc-12", "installed"]


def test_cmd_record_parsing():
    from toolchains.cmdfile import parse, split_command
    text = ("savedcmd_mm/x.o := gcc -Wp,-MMD,mm/.x.o.d -DA='\"a;b\"' -DH=$(pound)1 -DD=$$x -c -o mm/x.o /s/mm/x.c"
            " ; ./tools/objtool/objtool --orc mm/x.o\n\nsource_mm/x.o := /s/mm/x.c\n\ndeps_mm/x.o := \\\n"
            "    $(wildcard include/config/SMP) \\\n  /s/include/linux/a.h \\\n  include/generated/autoconf.h \\\n\n"
            "mm/x.o: $(deps_mm/x.o)\n\n$(deps_mm/x.o):\n\nmm/x.o: $(wildcard ./tools/objtool/objtool)\n")
    rec = parse(text, "mm/x.o")
    assert rec.source == "/s/mm/x.c" and rec.depfile() == "mm/.x.o.d"
    assert rec.deps == ("/s/include/linux/a.h", "include/generated/autoconf.h")
    assert rec.config_deps == ("include/config/SMP",)
    assert rec.objtool_line == "mm/x.o: $(wildcard ./tools/objtool/objtool)"
    assert rec.compile_part.endswith("-DH=#1 -DD=$x -c -o mm/x.o /s/mm/x.c") and "'\"a;b\"'" in rec.compile_part
    assert rec.post_part == "./tools/objtool/objtool --orc mm/x.o"
    assert rec.source_deps(Path("/s")) == {"mm/x.c", "include/linux/a.h"}
    assert rec.source_deps(Path("/elsewhere")) is None
    assert split_command("a 'x;y' ; b") == ("a 'x;y'", "b")


@pytest.mark.parametrize("path,blocks", [
    ("Makefile", True), ("mm/Makefile", True), ("mm/Kconfig", True), ("arch/x86/Kconfig.cpu", True),
    ("scripts/Makefile.build", True), ("scripts/basic/fixdep.c", True), ("tools/objtool/check.c", True),
    ("include/linux/mmzone.h", True), ("mm/internal.h", True), ("arch/x86/include/asm/page.h", True),
    ("arch/x86/entry/syscalls/syscall_64.tbl", True), ("kernel/bounds.c", True),
    ("arch/x86/kernel/asm-offsets_64.c", True), ("arch/x86/configs/x86_64_defconfig", True),
    ("kernel/configs/tiny.config", True), ("arch/x86/kernel/vmlinux.lds.S", True),
    ("mm/page_alloc.c", False), ("mm/slub.c", False), ("Documentation/mm/index.rst", False),
    ("drivers/net/loopback.c", False), ("MAINTAINERS", False),
])
def test_which_changes_forbid_a_replay(path, blocks):
    from toolchains.replay import BUILD_INPUT
    assert bool(BUILD_INPUT.search(path)) is blocks


def test_sandbox_command_line(tmp_path):
    from toolchains.sandbox import Sandbox
    bd, wt, tree = tmp_path / "cache/build/x", tmp_path / "cache/worktrees/x", tmp_path / "tree"
    for d in (bd, wt, tree):
        d.mkdir(parents=True)
    sb = Sandbox(True, (bd,), (tree, wt), (Path("/tmp"), tmp_path / "cache"), "/usr/bin:/bin")
    argv = sb.wrap(["make", "x"], bd)
    assert argv[-3:] == ["--", "make", "x"]
    for flag in ("--unshare-all", "--die-with-parent", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    i_mask = argv.index(str((tmp_path / "cache").resolve()))
    i_bind = argv.index("--bind")
    assert argv[i_mask - 1] == "--tmpfs" and i_mask < i_bind and argv[i_bind + 1] == str(bd.resolve())
    ro = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert ro == ["/", str(tree.resolve()), str(wt.resolve())]
    env = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert env["PATH"] == "/usr/bin:/bin" and env["LC_ALL"] == "C" and not any("SMTP" in k for k in env)
    assert Sandbox(False).wrap(["make"], bd) == ["make"]


def test_linked_cache_dir_and_worktrees(fake, tmp_path):
    """A cache reached through a symlink, and worktrees linked from another cache (what the
    benches' private caches do): the sandbox binds real paths, the builds still work."""
    tree, c, _ = fake
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    o = BuildOptions(cache=tmp_path / "link")
    b = build_commit(tree, c["base"], "gcc-12", ["mm/page_alloc.o"], options=o)
    assert b.status == "ok", b.errors
    other = tmp_path / "other"
    (other / "worktrees").mkdir(parents=True)
    (other / "worktrees" / b.worktree.name).symlink_to(b.worktree)
    (other / "build").mkdir()
    shutil.copytree(b.build_dir, other / "build" / b.build_dir.name, symlinks=True)
    b2 = build_commit(tree, c["src"], "gcc-12", ["mm/page_alloc.o"], options=BuildOptions(cache=other))
    assert b2.status == "ok" and b2.targets[0].method == "replay", b2.targets[0]


def test_two_builds_of_the_same_commit_at_once_compile_once(fake, tmp_path):
    """Two callers (threads here, processes alike: the locks are files) ask for the same build:
    one builds, the other waits and takes its result."""
    import threading
    tree, c, _ = fake
    o = opts(tmp_path)
    got = []
    threads = [threading.Thread(target=lambda: got.append(build_commit(tree, c["base"], "gcc-12",
                                                                       ["mm/page_alloc.o"], options=o)))
               for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(b.targets[0].method for b in got) == ["cached", "kbuild"]
    compiles = (got[0].build_dir / ".fake-compiles").read_text().splitlines()
    assert len(compiles) == 2                    # make's compile and the inline report's, nothing more

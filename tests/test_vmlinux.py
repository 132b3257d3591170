"""The linked kernel as a pipeline target (issue 13, build side): the ``allocator`` config, vmlinux
per patch beside the object, ``size`` totals, the allocator's unit read inside vmlinux, retention.

The kernel tests build the ``allocator`` vmlinux of the example series under gcc-12 and clang-19
once per machine (tests/kernel_images.py: ~3.5 min per toolchain with -j2, then ~6 s per patch;
afterwards taken from the cache), then run ``sizewatch run --targets mm/page_alloc.o,vmlinux
--config allocator`` into a fresh store and check it against the kernel's scripts/bloat-o-meter,
binutils ``size`` and the object's own report.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import EXAMPLE_MBOX, sizewatch_cmd

TOOLCHAINS = ("gcc-12", "clang-19")
PA = "mm/page_alloc.o"


# --- the configs as data --------------------------------------------------------------------

def test_configs_are_data_beside_the_registry():
    from toolchains import presets
    from toolchains.kbuild import PRESETS, Config, preset
    assert {"defconfig", "allocator", "tinyconfig"} <= set(presets.names())
    assert PRESETS["defconfig"] == Config()                     # the default build dirs keep their key
    a = preset("allocator")
    assert a.base == "tinyconfig" and a.key.startswith("allocator-")
    for opt in ("CC_OPTIMIZE_FOR_PERFORMANCE", "64BIT", "SMP", "NUMA", "MIGRATION", "COMPACTION", "CMA",
                "CGROUPS", "MEMCG", "TRANSPARENT_HUGEPAGE", "PRINTK", "MODULES", "DEBUG_KERNEL",
                "DEBUG_INFO_DWARF5", "PVH", "BLK_DEV_INITRD", "SERIAL_8250_CONSOLE"):
        assert f"CONFIG_{opt}=y" in a.fragment, opt
    assert "# CONFIG_DEBUG_INFO_NONE is not set" in a.fragment


@pytest.mark.parametrize("name", ["allmodconfig", "../registry/gcc-12", ""])
def test_unknown_config_is_one_line(name):
    from toolchains.errors import BuildError
    from toolchains.kbuild import preset
    with pytest.raises(BuildError, match="unknown config .*known: allocator, defconfig, tinyconfig"):
        preset(name)


def test_config_file_without_base_is_refused(tmp_path):
    from toolchains import presets
    from toolchains.errors import BuildError
    (tmp_path / "x.config").write_text("CONFIG_SMP=y\n")
    with pytest.raises(BuildError, match="first line must name the base"):
        presets.load("x", tmp_path)
    (tmp_path / "y.config").write_text("# base: tinyconfig\nCONFIG_SMP=y\nrubbish\n")
    with pytest.raises(BuildError, match="not a config fragment line: 'rubbish'"):
        presets.load("y", tmp_path)


def test_dropped_option_names_it(tmp_path):
    """What olddefconfig left of the fragment is checked line by line: an option it dropped (or
    turned on against the fragment) is the one-line error, naming it."""
    from toolchains.errors import BuildError
    from toolchains.kbuild import _check_fragment, preset
    cfg = tmp_path / ".config"
    want = preset("allocator")
    full = [ln for ln in want.fragment]
    cfg.write_text("\n".join(full) + "\n")
    _check_fragment(cfg, want)                                   # everything survived
    cfg.write_text("\n".join(ln if ln != "CONFIG_CMA=y" else "# CONFIG_CMA is not set" for ln in full) + "\n")
    with pytest.raises(BuildError) as e:
        _check_fragment(cfg, want)
    assert str(e.value) == ("config allocator: CONFIG_CMA=y did not survive olddefconfig "
                            "(# CONFIG_CMA is not set)")
    cfg.write_text("\n".join(ln for ln in full if ln != "CONFIG_NUMA=y") + "\n")
    with pytest.raises(BuildError, match=r"CONFIG_NUMA=y did not survive olddefconfig \(absent"):
        _check_fragment(cfg, want)
    cfg.write_text("\n".join(full + ["CONFIG_DEBUG_INFO_NONE=y"]) + "\n")
    with pytest.raises(BuildError, match="CONFIG_DEBUG_INFO_NONE is on after olddefconfig"):
        _check_fragment(cfg, want)


def test_bot_config_key(tmp_path):
    from analyzer.errors import InputError
    from ci.bot.policy import parse_policy
    from toolchains.kbuild import Config, preset
    assert parse_policy("").kbuild_config == Config()
    # the old spelling (the defconfig fragment given in full) is the same config, not a new build dir
    old = parse_policy('[bot]\nconfig_fragment = ["CONFIG_DEBUG_INFO_DWARF5=y", '
                       '"# CONFIG_DEBUG_INFO_NONE is not set"]\n')
    assert old.kbuild_config == Config()
    pol = parse_policy('[bot]\nconfig = "allocator"\ntargets = ["mm/page_alloc.o", "vmlinux"]\nkeep_vmlinux = 1\n')
    assert pol.kbuild_config == preset("allocator") and pol.keep_vmlinux == 1
    extra = parse_policy('[bot]\nconfig = "allocator"\nconfig_fragment = ["CONFIG_KASAN=y"]\n').kbuild_config
    assert extra.fragment[-1] == "CONFIG_KASAN=y" and extra.key.startswith("allocator-") and extra != pol.kbuild_config
    with pytest.raises(InputError, match=r"\[bot\].config: unknown config 'allmod'"):
        parse_policy('[bot]\nconfig = "allmod"\n')
    with pytest.raises(InputError, match="not a config fragment line"):
        parse_policy('[bot]\nconfig_fragment = ["KASAN=y"]\n')


def test_run_refuses_bad_config_and_keep_in_one_line(tmp_path):
    for args, msg in ((("--config", "allmod"), "unknown config 'allmod'"),
                      (("--keep-vmlinux", "-1"), "--keep-vmlinux: must be 0 or more"),
                      (("--targets", "vmlinux,../x.o"), "bad target")):
        p = subprocess.run([*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), *args, "--db",
                            str(tmp_path / "s.db")], capture_output=True, text=True, timeout=120)
        assert p.returncode == 1 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "s.db").exists()        # refused before the store is opened


# --- retention ------------------------------------------------------------------------------

def _kept_tree(root: Path, n: int) -> list[Path]:
    out = []
    for i in range(n):
        p = root / f"sha{i}" / "vmlinux"
        p.parent.mkdir(parents=True)
        p.write_bytes(b"\x7fELF" + bytes([i]))
        (p.parent / "vmlinux.json").write_text("{}")
        os.utime(p, ns=(i * 10**9, i * 10**9))
        out.append(p)
    return out


def test_retention_keeps_the_newest(tmp_path):
    from toolchains.retention import kept, prune, touch
    files = _kept_tree(tmp_path, 5)
    assert kept(tmp_path) == files[::-1]
    touch(files[0])                                  # read again: now the newest
    gone = prune(tmp_path, 2)
    assert sorted(gone) == sorted(files[1:4])
    assert [p.exists() for p in files] == [True, False, False, False, True]
    assert all((p.parent / "vmlinux.json").exists() for p in files)   # the build records stay
    assert prune(tmp_path, 2) == [] and prune(tmp_path / "none", 1) == []


def test_retention_never_deletes_a_file_being_read(tmp_path):
    """A reader holds the file with locks.reading (a shared flock); the pass skips it and takes it
    on a later pass; a reader that comes after the deletion gets FileNotFoundError, not half a file."""
    from toolchains.locks import reading
    from toolchains.retention import prune
    files = _kept_tree(tmp_path, 3)
    with reading(files[0]):
        gone = prune(tmp_path, 1)
        assert gone == [files[1]] and files[0].exists()
        # another process's pass (a separate open file description) skips it too
        code = ("import sys; from pathlib import Path; from toolchains.retention import prune; "
                f"print(len(prune(Path({str(tmp_path)!r}), 1)))")
        p = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parent.parent)
        assert p.stdout.strip() == "0", p.stderr
    assert prune(tmp_path, 1) == [files[0]]
    with pytest.raises(FileNotFoundError):
        with reading(files[0]):
            pass


def test_size_line_is_binutils_size(compile_c, tmp_path):
    """analyzer.sections' Berkeley line is byte for byte what ``size`` prints for the same file."""
    from analyzer.elf import load_images
    from analyzer.sections import SIZE_HEADER, section_sizes, size_line
    src = tmp_path / "t.c"
    src.write_text("int d = 1; int b[100]; const char r[] = \"ro\"; int f(int x) { return x * d + b[x]; }\n")
    obj = compile_c("gcc-12", src)
    want = subprocess.run(["size", str(obj)], capture_output=True, text=True, check=True).stdout
    assert want == SIZE_HEADER + "\n" + size_line(section_sizes(load_images(obj)), str(obj)) + "\n"


# --- the allocator vmlinux per patch, in the pipeline ------------------------------------------

@pytest.fixture(scope="module")
def vmlinux_run(tmp_path_factory):
    """The allocator vmlinux at each commit of the example series under both toolchains (built once
    per machine, one toolchain after the other), then one ``sizewatch run`` into a fresh store."""
    from kernel_images import allocator_vmlinux
    images = {tc: allocator_vmlinux(tc) for tc in TOOLCHAINS}
    db = tmp_path_factory.mktemp("vmlinux-store") / "store.db"
    cmd = [*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), "--targets", f"{PA},vmlinux",
           "--config", "allocator", "--toolchains", ",".join(TOOLCHAINS), "--db", str(db), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"sizewatch run --config allocator failed:\n{proc.stderr}")
    return images, db, json.loads(proc.stdout), proc


def _part(report: dict, position: int, tc: str, target: str) -> dict:
    (p,) = [p for p in report["patches"] if p["position"] == position]
    (t,) = [t for t in p["toolchains"] if t["toolchain"] == tc and t["target"] == target]
    return t


def _rows(part: dict) -> dict[str, tuple]:
    return {r["name"]: (r["old"], r["new"], r["delta"]) for r in part["tables"][0]["rows"]}


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_vmlinux_beside_the_object(vmlinux_run):
    images, db, report, proc = vmlinux_run
    assert "0 failed" in proc.stderr, proc.stderr
    for tc in TOOLCHAINS:
        for pos in (1, 2):
            v, o = _part(report, pos, tc, "vmlinux"), _part(report, pos, tc, PA)
            assert v["status"] == o["status"] == "ok" and v["config"].startswith("allocator-")
            assert v["analyzed"] and v["tables"] and o["tables"]
            # the same inline changes, with the compiler's reasons (the object's report: the same
            # compile is linked); placement findings (line counts, boundary crossings) may differ:
            # in vmlinux they are taken at the functions' real addresses
            from analyzer.kinds import INLINE_CHANGES
            kinds = {k.value for k in INLINE_CHANGES}
            changes = [{(f["kind"], f["function"], f["message"]) for f in part["findings"]
                        if f.get("base_build_id") and f["kind"] in kinds} for part in (v, o)]
            assert changes[0] == changes[1] and changes[0], (tc, pos, changes[0] ^ changes[1])
    reasons = [f["message"] for f in _part(report, 1, "clang-19", "vmlinux")["findings"]
               if f["kind"] == "newly_out_of_line"]
    assert reasons and all("compiler: too costly to inline" in m for m in reasons), reasons


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_seed_effect_in_vmlinux_as_in_object(vmlinux_run):
    """Patch 2 (__always_inline) inlines the __rmqueue helpers patch 1 left out of line and grows
    get_page_from_freelist: in vmlinux exactly as in the object (every function of the object's
    table has the same old, new and delta in vmlinux's)."""
    _, _, report, _ = vmlinux_run
    for tc in TOOLCHAINS:
        for pos in (1, 2):
            obj, vml = _rows(_part(report, pos, tc, PA)), _rows(_part(report, pos, tc, "vmlinux"))
            assert obj, (tc, pos)
            for name, row in obj.items():
                assert vml.get(name) == row, (tc, pos, name, row, vml.get(name))
        # patch 1 (static inline) lets each compiler build some __rmqueue helpers out of line (in this
        # config, at -O2: gcc-12 __rmqueue and __rmqueue_smallest, clang-19 __rmqueue_fallback and
        # __rmqueue_smallest); patch 2 (__always_inline) inlines every one of them again
        p1, p2 = _rows(_part(report, 1, tc, "vmlinux")), _rows(_part(report, 2, tc, "vmlinux"))
        outlined = {n for n, (old, new, _) in p1.items() if n.startswith("__rmqueue") and old is None}
        gone = {n for n, (old, new, _) in p2.items() if n.startswith("__rmqueue") and new is None}
        want = {"gcc-12": {"__rmqueue", "__rmqueue_smallest"},
                "clang-19": {"__rmqueue_fallback", "__rmqueue_smallest"}}[tc]
        assert outlined == want, (tc, p1)
        assert gone == outlined, (tc, gone, outlined)
        assert p2["get_page_from_freelist"][2] > 0, (tc, p2.get("get_page_from_freelist"))
        assert p2["steal_suitable_fallback"][0] is None, (tc, p2.get("steal_suitable_fallback"))


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_vmlinux_table_is_bloat_o_meter(vmlinux_run, bloat_o_meter):
    images, _, report, _ = vmlinux_run
    for tc in TOOLCHAINS:
        v = images[tc].vmlinux
        for pos in (1, 2):
            ref = bloat_o_meter(v[pos - 1], v[pos])
            assert ref.returncode == 0 and ref.stdout.startswith(b"add/remove: "), ref.stderr
            assert _part(report, pos, tc, "vmlinux")["bloat_text"] == ref.stdout.decode(), (tc, pos)


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_vmlinux_size_totals_are_size(vmlinux_run):
    images, db, report, _ = vmlinux_run

    def size(path: Path) -> dict:
        out = subprocess.run(["size", str(path)], capture_output=True, text=True, check=True).stdout
        text, data, bss, dec = (int(x) for x in out.splitlines()[1].split()[:4])
        return {"text": text, "data": data, "bss": bss, "dec": dec}

    for tc in TOOLCHAINS:
        v = images[tc].vmlinux
        for pos in (1, 2):
            part = _part(report, pos, tc, "vmlinux")
            assert part["size"] == size(v[pos]) and part["base_size"] == size(v[pos - 1]), (tc, pos)
            assert "size" not in _part(report, pos, tc, PA)
    # the text report prints size's own lines for the parent and the patch
    text = subprocess.run([*sizewatch_cmd(), "report", "1", "--db", str(db), "--targets", "vmlinux"],
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    want = subprocess.run(["size", str(images["gcc-12"].vmlinux[2])], capture_output=True, text=True).stdout
    numbers = want.splitlines()[1].rsplit("\t", 1)[0]
    assert f"{numbers}\tvmlinux\n" in text.stdout and "   text\t   data\t    bss\t    dec\t    hex\tfilename" in text.stdout
    # the bot mail carries the same lines under vmlinux's table, tabs expanded, within 78 columns
    from ci.reports import mail
    from ci.reports.model import series_report
    from db.store import open_store
    with open_store(db, read_only=True) as store:
        rep = series_report(store, 1, targets=["vmlinux"])
    (t,) = [t for t in rep.patches[1].toolchains if t.toolchain == "gcc-12"]
    block = mail.size_block(t)
    assert all(len(ln) <= mail.WIDTH for ln in block)
    assert block[0] == "   text\t   data\t    bss\t    dec\t    hex\tfilename".expandtabs(8), block
    assert (numbers + "\tvmlinux").expandtabs(8) in block, block


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_allocator_facts_from_its_unit_inside_vmlinux(vmlinux_run):
    """vmlinux builds store the inline facts of mm/page_alloc.c's unit only, and they agree with the
    object's: same size and inline status of the allocator's functions at every commit."""
    images, db, _, _ = vmlinux_run
    from db.store import open_store
    from toolchains.kbuild import preset
    key = preset("allocator").key
    with open_store(db, read_only=True) as store:
        for tc in TOOLCHAINS:
            for sha in images[tc].shas:
                v = store.find_build("linux-6.1", sha, tc, key, "vmlinux")
                o = store.find_build("linux-6.1", sha, tc, key, PA)
                facts = store.object_facts(v.id)["vmlinux"]
                assert [u.rsplit("/", 2)[-2:] for u in facts["units"]] == [["mm", "page_alloc.c"]], facts["units"]
                assert "start_kernel" not in facts["functions"]
                vf = {f.name: f for f in store.functions_for(v.id)}
                of = {f.name: f for f in store.functions_for(o.id)}
                for name in ("get_page_from_freelist", "__rmqueue_smallest", "__rmqueue_fallback", "rmqueue",
                             "__alloc_pages", "free_unref_page"):
                    a, b = vf.get(name), of.get(name)
                    assert (a is None) == (b is None), (tc, sha[:12], name)
                    if a is not None:
                        assert (a.size, a.declared, a.out_of_line, a.inlined_count) == \
                               (b.size, b.declared, b.out_of_line, b.inlined_count), (tc, sha[:12], name)
            # the symbols keep their link addresses (kernel addresses are above 2**63), as nm lists them
            v = store.find_build("linux-6.1", images[tc].shas[0], tc, key, "vmlinux")
            nm = subprocess.run(["nm", str(images[tc].vmlinux[0])], capture_output=True, text=True, check=True)
            want = {ln.split()[2]: int(ln.split()[0], 16) for ln in nm.stdout.splitlines()
                    if ln.split()[1:2] == ["T"] and len(ln.split()) == 3}
            got = {s.name: s.offset for s in store.symbols_for(v.id) if s.letter == "T"}
            assert got["__alloc_pages"] == want["__alloc_pages"] >= 1 << 63
            assert all(got[n] == a for n, a in want.items() if n in got)
            # patch 2: inlined into their callers, no out-of-line copy left, in vmlinux too
            v = store.find_build("linux-6.1", images[tc].shas[2], tc, key, "vmlinux")
            vf = {f.name: f for f in store.functions_for(v.id)}
            assert not vf["__rmqueue_smallest"].out_of_line and vf["__rmqueue_smallest"].inlined_count >= 1


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_vmlinux_without_symbols_is_a_failed_build_in_one_line(tmp_path):
    """A vmlinux the analyzer cannot use (stripped: no symbols) is stored as this build's failure with
    the analyzer's one-line reason, not a traceback and not a half-written build."""
    import shutil
    from ci.pipeline import builder
    from ci.pipeline.run import _record
    from db.models import Commit
    from db.store import open_store
    from kernel_images import allocator_vmlinux
    from toolchains.source import Tree
    images = allocator_vmlinux("gcc-12", 1)
    bad = tmp_path / "vmlinux"
    shutil.copy(images.vmlinux[0], bad)
    subprocess.run(["strip", str(bad)], check=True)
    commit = Commit(images.shas[0], None, "base", tree="linux-6.1")
    done = builder.Built(images.shas[0], "gcc-12", "gcc-12 (test)", "gcc", "allocator-x", "", None, "ok", "cached",
                         1.0, "", [], {"vmlinux": bad})
    with open_store(tmp_path / "s.db") as store:
        store.record_commits("linux-6.1", [commit])
        bid = _record(store, Tree("linux-6.1", images.tree), commit, done, "vmlinux")
        b = store.find_build("linux-6.1", images.shas[0], "gcc-12", "allocator-x", "vmlinux")
        assert b.id == bid and b.status == "failed" and store.objects_for(bid) == []
        assert b.errors == [f"{bad}: no symbols (stripped file?)"]


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_vmlinux_that_does_not_link_is_one_line(tmp_path):
    """A patch that compiles but does not link (a call to a function nobody defines): the vmlinux
    build fails with the linker's own line naming the symbol, under each compiler's linker. The
    build dir is the shared one: put back (linked again at the commit it held) however this ends,
    and the failed result is kept under tmp_path, not in the shared cache."""
    from buildtrees import commit_on, edit
    from kernel_images import allocator_vmlinux, put_back
    from toolchains.build import BuildOptions, build_commit
    from toolchains.kbuild import preset
    for tc in TOOLCHAINS:
        images = allocator_vmlinux(tc)                      # the build dir is there: an incremental make
        tree, base = images.tree, images.shas[0]
        anchor = "void __free_pages(struct page *page, unsigned int order)\n{\n"
        text = edit(tree, base, "mm/page_alloc.c", anchor,
                    "extern void sizewatch_no_such_function(void);\n" + anchor + "\tsizewatch_no_such_function();\n")
        sha = commit_on(tree, base, {"mm/page_alloc.c": text}, "call a function nobody defines")
        with put_back(tree, tc, tmp_path, images.shas[-1]):
            b = build_commit(tree, sha, tc, ["vmlinux"], preset("allocator"),
                             BuildOptions(reports=False, jobs=2, timeout=1800, out_root=tmp_path / "unlinked"))
        r = b.targets[0]
        assert r.status == "failed" and r.path is None, (tc, r.status)
        assert r.errors and all("\n" not in e for e in r.errors), r.errors
        assert "sizewatch_no_such_function" in r.errors[0] and \
            ("undefined reference" in r.errors[0] or "undefined symbol" in r.errors[0]), (tc, r.errors)
        from toolchains import buildstate
        from toolchains.build import layout
        from toolchains.git import git
        lay = layout(tree, tc, preset("allocator"), BuildOptions())
        back = buildstate.synced(lay.build_dir)           # linked again, not at the commit that does not link
        assert back not in (None, sha) and git(lay.worktree, "rev-parse", "HEAD").strip() == back, (tc, back)
        assert (lay.build_dir / "vmlinux").is_file()


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_commit_page_shows_vmlinux_beside_the_object(vmlinux_run, tmp_path):
    """The dashboard's commit page (and its JSON twin) has a section per target: vmlinux with its
    bloat-o-meter table and size's lines, beside mm/page_alloc.o."""
    images, db, report, _ = vmlinux_run
    from web.app import create_app
    from web.settings import WebSettings
    client = create_app(WebSettings(db, token=None, jobs_dir=tmp_path / "jobs")).test_client()
    sha = images["gcc-12"].shas[2]
    page = client.get(f"/commit/{sha}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    part = _part(report, 2, "gcc-12", "vmlinux")
    want = subprocess.run(["size", str(images["gcc-12"].vmlinux[2])], capture_output=True, text=True).stdout
    numbers = want.splitlines()[1].rsplit("\t", 1)[0]
    assert f"{numbers}\tvmlinux\n" in html and "· vmlinux ·" in html and "· mm/page_alloc.o ·" in html
    api = client.get(f"/api/commit/{sha}").get_json()
    v = [t for t in api["toolchains"] if t["toolchain"] == "gcc-12" and t["target"] == "vmlinux"]
    assert len(v) == 1 and v[0]["size_text"].splitlines()[2].startswith(numbers)
    assert {r["name"] for r in v[0]["tables"][0]["rows"]} == {r["name"] for r in part["tables"][0]["rows"]}


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_rerun_and_bisect_from_the_dashboard_keep_the_config(vmlinux_run):
    """The dashboard's re-run and bisect of a commit stored with ``--config allocator`` build
    ``allocator`` again (not a first defconfig vmlinux)."""
    from db.store import open_store
    from toolchains.kbuild import preset_name
    from web.pages.actions import _config_args
    _, db, report, _ = vmlinux_run
    sha = [p for p in report["patches"] if p["position"] == 1][0]["commit"]["sha"]
    with open_store(db, read_only=True) as store:
        builds = store.builds_for_commit(sha)
    assert builds and {preset_name(b.config_key) for b in builds} == {"allocator"}
    assert _config_args(builds) == ["--config", "allocator"]
    assert _config_args([b for b in builds if b.toolchain == "gcc-12" and b.target == "vmlinux"]) == \
        ["--config", "allocator"]


def _nm_pieces(path: Path) -> dict[str, list[tuple[str, int, int]]]:
    """nm's function symbols of a linked image by source function (the name before the first
    dot: ``foo.constprop.0`` and ``foo.cold`` are pieces of ``foo``): [(symbol, address, size)]."""
    from link_oracles import nm_text
    out: dict[str, list] = {}
    for rows in nm_text(path).values():
        for sym, addr, size in rows:
            out.setdefault(sym.split(".")[0], []).append((sym, addr, size))
    return out


def _nm_crossings(base: Path, head: Path, names) -> dict[str, dict]:
    """The boundary crossings nm shows for the hot functions ``names``: a function out of line in
    both images whose pieces grew in all, its main piece (not .cold, fewest clone suffixes, then by
    name) spanning more 16-byte blocks (or padded to more) or more 64-byte lines at its address."""
    from link_oracles import spans
    bp, hp = _nm_pieces(base), _nm_pieces(head)
    out = {}
    for name in names:
        if name not in bp or name not in hp:
            continue
        if sum(s for _n, _a, s in hp[name]) <= sum(s for _n, _a, s in bp[name]):
            continue

        def main(pieces):
            sym, addr, size = min(pieces, key=lambda p: ("cold" in p[0].split(".")[1:],
                                                        len([x for x in p[0].split(".")[1:] if not x.isdigit()]), p[0]))
            return {"offset": addr, "size": size, "blocks": spans(addr, size, 16), "lines": spans(addr, size, 64),
                    "padded": -(-size // 16) * 16}
        b, h = main(bp[name]), main(hp[name])
        crossed = (["alignment"] if h["padded"] > b["padded"] or h["blocks"] > b["blocks"] else []) + \
            (["cache_line"] if h["lines"] > b["lines"] else [])
        if crossed:
            out[name] = {"base": b, "head": h, "crossed": crossed}
    return out


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_vmlinux_link_findings_are_nm(vmlinux_run):
    """Per toolchain and patch, what the run stored for vmlinux against ``nm -n -S`` of the parent's
    and the patch's vmlinux (tests/link_oracles.py): every hot function's move (places, shift, causes,
    explanation), each build's stored layout (every hot function, its place, neighbours and padding),
    the link_cache_lines and link_phase findings, and the boundary_crossing findings
    taken at the functions' link addresses (the hot functions of mm/page_alloc.c's unit)."""
    from analyzer.hotpaths import HotPaths
    from ci.pipeline.link_layout import CAUSES_KEPT
    from db.store import open_store
    from link_oracles import assert_layout_is_nm, assert_link_findings_are_nm, assert_moves_are_nm, nm_moves
    from toolchains.kbuild import preset
    images, db, report, _ = vmlinux_run
    hot = HotPaths()
    key = preset("allocator").key
    crossings = 0
    with open_store(db, read_only=True) as store:
        for tc in TOOLCHAINS:
            v = images[tc].vmlinux
            for sha, path in zip(images[tc].shas, v):       # each build's stored layout
                stored = store.link_layout_for(store.find_build("linux-6.1", sha, tc, key, "vmlinux").id)
                assert_layout_is_nm(stored["vmlinux"], path, hot.__contains__)
            for pos in (1, 2):
                base, head = v[pos - 1], v[pos]
                want = nm_moves(base, head, hot.__contains__)
                b = store.find_build("linux-6.1", images[tc].shas[pos - 1], tc, key, "vmlinux")
                h = store.find_build("linux-6.1", images[tc].shas[pos], tc, key, "vmlinux")
                assert_moves_are_nm(store.link_moves_for(h.id, b.id), want, CAUSES_KEPT)
                part = _part(report, pos, tc, "vmlinux")
                found = [f for f in part["findings"] if f["kind"] in ("link_cache_lines", "link_phase")]

                # the report's JSON findings: stored rows (kind, function, message, data = the finding)
                assert_link_findings_are_nm([SimpleNamespace(**f) for f in found], want)
                unit = {f.name for f in store.functions_for(h.id)} & {f.name for f in store.functions_for(b.id)}
                want_x = _nm_crossings(base, head, sorted(n for n in unit if n in hot))
                got_x = {f["function"]: f["data"]["details"] for f in part["findings"] if f["kind"] == "boundary_crossing"}
                assert got_x.keys() == want_x.keys(), (tc, pos)
                for name, w in want_x.items():
                    d = got_x[name]
                    assert d["crossed"] == w["crossed"] and d["placed"], (tc, pos, name)
                    for side in ("base", "head"):
                        assert {k: d[side][k] for k in w[side]} == w[side], (tc, pos, name, side)
                crossings += len(want_x)
    assert crossings        # patch 2 grows get_page_from_freelist across boundaries

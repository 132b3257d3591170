"""clang ThinLTO kernels (issue 30): `sizewatch run --lto thin` on the allocator config.

Under ThinLTO every per-unit ``.o`` is LLVM bitcode and the machine code (with inlining across
units) is made when ld.lld links vmlinux.o, so only the linked vmlinux is analysed. The kernel tests
build the example series' base and patch 1 under clang-19 with CONFIG_LTO_CLANG_THIN once per
machine (``toolchains.build.build_commit``, kept under the sizewatch cache like the other kernel
builds: ~7-14 min for the first, a full ThinLTO relink per patch), run ``sizewatch run --lto thin``
on them into a fresh store, and check it against the oracles: the kernel's scripts/bloat-o-meter,
pyelftools' reading of the same vmlinux, and pyelftools again for the cross-unit inlines (an
inlined instance whose DW_AT_abstract_origin is a DW_FORM_ref_addr into another unit).
"""
from __future__ import annotations

import json
from collections import Counter
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLE_MBOX, sizewatch_cmd

TC = "clang-19"
PA = "mm/page_alloc.o"


# --- the config and the refusals (no kernel build) ---------------------------------------------

def test_thinlto_config_key_is_readable_and_maps_back():
    from toolchains.kbuild import LTO_THIN, PRESETS, preset, preset_name
    for arch in ("x86_64", "arm64"):
        plain, thin = preset("allocator", arch=arch), preset("allocator", arch=arch, lto="thin")
        assert thin.lto == "thin" and plain.lto == ""
        assert thin.fragment[:len(plain.fragment)] == plain.fragment
        assert thin.fragment[len(plain.fragment):] == (LTO_THIN, "# CONFIG_LTO_NONE is not set")
        want = "allocator-" + ("" if arch == "x86_64" else "arm64-") + "thinlto-"
        assert thin.key.startswith(want) and "thinlto" not in plain.key, thin.key
        assert preset_name(thin.key) == preset_name(plain.key) == "allocator"
    assert preset("defconfig", lto="thin").key.startswith("defconfig-thinlto-")
    # the keys of the builds already stored are those they were stored under
    assert PRESETS["allocator"].key == preset("allocator").key and not PRESETS["allocator"].lto
    from toolchains.errors import BuildError
    with pytest.raises(BuildError, match=r"^unknown --lto 'full' \(known: thin\)$"):
        preset("allocator", lto="full")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), "--config", "allocator",
                           "--lto", "thin", "--db", str(tmp_path / "s.db"), *args],
                          capture_output=True, text=True, timeout=120)


def test_run_lto_refuses_gcc_and_objects_in_one_line(tmp_path):
    for args, msg in ((("--toolchains", "gcc-12,clang-19", "--targets", "vmlinux"),
                       "sizewatch: --lto thin: ThinLTO is clang's (CONFIG_LTO_CLANG_THIN): gcc-12 cannot build "
                       "it; give --toolchains clang-19"),
                      (("--toolchains", TC, "--targets", f"{PA},vmlinux"),
                       f"sizewatch: under ThinLTO {PA} is LLVM bitcode: give --targets vmlinux"),
                      (("--toolchains", TC),                 # the default target is the object
                       f"sizewatch: under ThinLTO {PA} is LLVM bitcode: give --targets vmlinux"),
                      (("--toolchains", TC, "--targets", "mm/", "--arch", "arm64"),
                       "sizewatch: under ThinLTO mm/ is LLVM bitcode: give --targets vmlinux")):
        p = _run(tmp_path, *args)
        assert p.returncode == 1 and p.stderr == msg + "\n" and not p.stdout, (args, p.stderr)
    assert not (tmp_path / "s.db").exists()        # refused before the store is opened, before any build


def test_dashboard_rerun_and_bisect_keep_lto_and_bisect_refuses_in_one_line(tmp_path):
    """The dashboard's re-run and bisect of a ThinLTO build ask for ThinLTO again; ``sizewatch
    bisect --lto thin`` refuses gcc and object targets as ``run`` does."""
    from types import SimpleNamespace as B
    from toolchains.kbuild import preset, preset_of
    from web.pages.actions import _config_args
    thin = preset("allocator", lto="thin")
    assert preset_of(thin.key) == ("allocator", "x86_64", "thin")
    assert preset_of(preset("allocator", arch="arm64", lto="thin").key) == ("allocator", "arm64", "thin")
    assert _config_args([B(config_key=thin.key)]) == ["--config", "allocator", "--lto", "thin"]
    assert _config_args([B(config_key=preset("allocator").key)]) == ["--config", "allocator"]
    assert _config_args([B(config_key=preset("defconfig", lto="thin").key)]) == ["--lto", "thin"]
    assert _config_args([B(config_key=preset("defconfig").key)]) == []
    for args, msg in ((("--toolchain", "gcc-12", "--target", "vmlinux"), "gcc-12 cannot build it"),
                      (("--toolchain", TC), f"under ThinLTO {PA} is LLVM bitcode: give --targets vmlinux")):
        p = subprocess.run([*sizewatch_cmd(), "bisect", "rmqueue", "v6.1..v6.2", "--outlined", "--config", "allocator",
                            "--lto", "thin", "--db", str(tmp_path / "b.db"), *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 1 and msg in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert not (tmp_path / "b.db").exists()


def test_pipeline_refuses_before_any_build(tmp_path):
    """The same refusals from ci.pipeline.run (a caller without the CLI: the bot, a script)."""
    from ci.pipeline.run import run
    from db.store import open_store
    from toolchains.errors import BuildError
    from toolchains.kbuild import preset

    def never(*a, **k):
        raise AssertionError("built")
    with open_store(tmp_path / "s.db") as store:
        for tcs, targets, msg in ((["gcc-12"], ["vmlinux"], "gcc-12 cannot build it"),
                                  ([TC], [PA], f"under ThinLTO {PA} is LLVM bitcode: give --targets vmlinux")):
            with pytest.raises(BuildError, match=msg):
                run(store, "6.1", None, EXAMPLE_MBOX, toolchains=tcs, targets=targets,
                    config=preset("allocator", lto="thin"), builds=never)


def test_sizediff_and_inspect_on_bitcode_say_what_it_is(tmp_path, sizediff):
    """A ThinLTO object (raw bitcode, and bitcode in its wrapper header) is named in one line, with
    what to compare instead, by sizediff (every mode) and sizewatch inspect."""
    src = tmp_path / "a.c"
    src.write_text("static int h(int x) { return x * 3 + 1; }\nint f(int y) { return h(y) + h(y + 1); }\n")
    bc = tmp_path / "a.o"
    subprocess.run(["clang-19", "-O2", "-g", "-flto=thin", "-c", str(src), "-o", str(bc)], check=True)
    assert bc.read_bytes()[:4] == b"BC\xc0\xde"
    wrapped = tmp_path / "w.o"           # the wrapper: magic, version, offset, size, cputype, then the bitcode
    raw = bc.read_bytes()
    wrapped.write_bytes(b"\xde\xc0\x17\x0b" + (0).to_bytes(4, "little") + (20).to_bytes(4, "little")
                        + len(raw).to_bytes(4, "little") + (0x01000007).to_bytes(4, "little") + raw)
    for obj in (bc, wrapped):
        want = (f"sizediff: {obj}: LLVM bitcode, not machine code (an LTO object: ld.lld makes its code "
                f"when it links): compare the linked vmlinux instead\n").encode()
        for args in ((obj, obj), ("-c", obj, obj), ("--inline-cost", obj, obj)):
            p = sizediff(*args)
            assert p.returncode == 1 and p.stderr == want and not p.stdout, (args, p.stderr)
        p = subprocess.run([*sizewatch_cmd(), "inspect", str(obj)], capture_output=True)
        assert p.returncode == 1 and p.stderr == want.replace(b"sizediff:", b"sizewatch:", 1), p.stderr


def test_ld_lld_writes_the_link_remarks_the_build_keeps(tmp_path):
    """The LD a ThinLTO build runs (``inline_report.lto_make_args``), on two bitcode units linked the
    way kbuild links vmlinux.o (``ld.lld -r``): one YAML file per backend task, the one of the unit
    asked for kept; its remarks are clang's format (analyzer.remarks), the cross-unit inline there."""
    import shlex
    from analyzer.remarks import read_remarks
    from toolchains import inline_report
    from toolchains.kbuild import make_cmd, preset
    from toolchains.registry import load
    tc = load(TC)
    cmd = make_cmd(tmp_path, tmp_path, tc, preset("allocator", lto="thin"), "vmlinux")
    (ld,) = [a for a in cmd if a.startswith("LD=")]
    assert ld == (f"LD=ld.lld-19 --opt-remarks-filename {tmp_path}/{inline_report.LTO_DIR}/ld.yaml "
                  "--opt-remarks-passes inline")
    assert not any(a.startswith("LD=") for a in make_cmd(tmp_path, tmp_path, tc, preset("allocator"), "vmlinux"))
    assert not any(a.startswith("LD=") for a in make_cmd(tmp_path, tmp_path, load("gcc-12"), preset("allocator"),
                                                          "vmlinux"))
    (tmp_path / "lib.c").write_text("int helper(int x) { return x * 3 + 1; }\n")
    (tmp_path / "use.c").write_text("int helper(int x);\nint use(int y) { return helper(y) + helper(y + 1); }\n")
    for c in ("lib.c", "use.c"):
        subprocess.run(["clang-19", "-O2", "-g", "-flto=thin", "-fsplit-lto-unit", "-c", c], cwd=tmp_path, check=True)
    (tmp_path / inline_report.LTO_DIR).mkdir()
    subprocess.run([*shlex.split(ld[3:]), "-m", "elf_x86_64", "-r", "-o", "out.o", "lib.o", "use.o"],
                   cwd=tmp_path, check=True)
    assert len(list((tmp_path / inline_report.LTO_DIR).glob("ld.yaml.thin.*"))) == 2
    dest = tmp_path / "vmlinux.remarks"
    assert inline_report.collect_lto(tmp_path, dest, unit="use.c")
    got = read_remarks(dest)
    assert {(r.callee, r.caller, r.decision) for r in got} == {("helper", "use", "inlined")}
    assert not inline_report.collect_lto(tmp_path / "nowhere", dest)


# --- the ThinLTO allocator kernel ----------------------------------------------------------------

@pytest.fixture(scope="module")
def thin(tmp_path_factory):
    """The ThinLTO allocator vmlinux at the series' base and patch 1 (built once per machine, then
    taken from the cache), and ``sizewatch run --lto thin`` over that pair into a fresh store."""
    from toolchains.build import BuildOptions, build_commit
    from toolchains.example import series_commits
    from toolchains.kbuild import preset
    tree, shas = series_commits()
    cfg = preset("allocator", lto="thin")
    images = []
    for sha in shas[:2]:
        b = build_commit(tree, sha, TC, ["vmlinux"], cfg, BuildOptions(jobs=2, timeout=3600))
        assert b.status == "ok" and b.targets[0].path is not None, (b.errors, b.targets[0].errors)
        images.append(b.targets[0].path)
    db = tmp_path_factory.mktemp("thinlto-store") / "s.db"
    p = subprocess.run([*sizewatch_cmd(), "run", f"{shas[0]}..{shas[1]}", "--tree", str(tree), "--config",
                        "allocator", "--lto", "thin", "--toolchains", TC, "--targets", "vmlinux", "--db", str(db),
                        "--json"], capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stderr[-3000:]
    return tree, shas[:2], images, b.build_dir, db, json.loads(p.stdout), cfg


def _kernel(f):
    """A test of the ThinLTO kernel (real clang-19, real linux-6.1; the first run builds it)."""
    return pytest.mark.kernel(pytest.mark.slow(pytest.mark.timeout(5400)(f)))


@_kernel
def test_thinlto_build_is_lto_and_its_objects_bitcode(thin):
    _, _, images, build_dir, _, _, cfg = thin
    config = (build_dir / ".config").read_text().splitlines()
    assert "CONFIG_LTO_CLANG_THIN=y" in config and "# CONFIG_LTO_NONE is not set" in config
    assert build_dir.name == f"{TC}-{cfg.key}" and cfg.key.startswith("allocator-thinlto-")
    assert (build_dir / PA).read_bytes()[:4] == b"BC\xc0\xde"
    assert all(p.read_bytes()[:4] == b"\x7fELF" for p in images)
    # no per-unit inline cost cache under LTO: a unit's code depends on the units it imported from
    from ci.pipeline.unit_cache import linked_here, object_keys
    from toolchains.build import BuildOptions, layout
    tree = thin[0]
    wt = layout(tree, TC, cfg, BuildOptions()).worktree.resolve()
    if linked_here(images[1], build_dir):
        assert object_keys(images[1], build_dir, wt) is None


@_kernel
def test_thinlto_vmlinux_table_is_bloat_o_meter(thin, bloat_o_meter):
    _, shas, images, _, _, report, cfg = thin
    (part,) = [t for p in report["patches"] for t in p["toolchains"] if p["commit"]["sha"] == shas[1]]
    assert part["status"] == "ok" and part["config"] == cfg.key and part["target"] == "vmlinux"
    ref = bloat_o_meter(images[0], images[1])
    assert ref.returncode == 0 and ref.stdout.startswith(b"add/remove: "), ref.stderr
    assert part["bloat_text"] == ref.stdout.decode()


@_kernel
def test_thinlto_inline_facts_are_pyelftools(thin):
    """The allocator's inline facts read from mm/page_alloc.c's units inside the ThinLTO vmlinux (its
    own unit, and the units other backends emitted for page_alloc.c's functions they imported):
    every inlined count is pyelftools' over the same units."""
    from db.store import open_store
    from inline_oracles import dwarf_inlines
    _, shas, images, _, db, _, cfg = thin
    with open_store(db, read_only=True) as store:
        for sha, image in zip(shas, images):
            v = store.find_build("linux-6.1", sha, TC, cfg.key, "vmlinux")
            assert v is not None and v.status == "ok"
            facts = {f.name: f for f in store.functions_for(v.id)}
            want = dwarf_inlines(image, "mm/page_alloc.c")
            assert len(want) > 50 and facts
            for name, callers in want.items():
                if name in facts:
                    assert facts[name].inlined_count == sum(callers.values()), (sha[:12], name)
            assert {n for n, f in facts.items() if f.inlined_count} <= set(want)


@_kernel
def test_cross_unit_inline_is_found_and_attributed(thin):
    """Inlining across units, which only LTO does: an inlined instance in one unit whose abstract
    origin is a DIE of another unit (DW_FORM_ref_addr), found by the analyzer's DWARF reading, checked
    with pyelftools on that unit, and attributed to its callee and caller by the inline cost (as the
    store holds it for the vmlinux build)."""
    from elftools.elf.elffile import ELFFile
    from analyzer.dwarf.read import read_dwarf
    from analyzer.inline_cost import inline_cost, open_with_dwarf
    from db.inline_cost import to_inline_cost
    from db.store import open_store
    _, shas, images, _, db, _, cfg = thin
    image = images[1]
    img, table = open_with_dwarf(image)
    dw = read_dwarf(img, table, None, engine="auto")
    cross = []                                  # (unit, instance, origin's unit) with the origin elsewhere
    owner = {off: u for u in dw.units for off in u.subprograms}
    for u in dw.units:
        for inst in u.inlined:
            if inst.origin not in u.subprograms and inst.origin in owner:
                cross.append((u, inst, owner[inst.origin]))
    assert cross
    # an allocator helper inlined into another unit, preferably
    pick = next((c for c in cross if c[2].name.endswith("mm/page_alloc.c")
                 and not c[0].name.endswith("mm/page_alloc.c")), cross[0])
    unit, inst, origin_unit = pick
    name = dw.name_of(inst.origin)
    assert name and origin_unit is not unit
    # pyelftools, on the unit holding the instance: a DW_FORM_ref_addr into another unit, same name
    with open(image, "rb") as f:
        elf = ELFFile(f)
        dwarf = elf.get_dwarf_info(relocate_dwarf_sections=False)
        cu = next(c for c in dwarf.iter_CUs() if c.get_top_DIE().attributes["DW_AT_name"].value.decode() == unit.name
                  and any(d.offset == inst.container for d in c.iter_DIEs()))
        forms = set()
        for d in cu.iter_DIEs():
            a = d.attributes.get("DW_AT_abstract_origin")
            if d.tag == "DW_TAG_inlined_subroutine" and a is not None and a.form == "DW_FORM_ref_addr" \
                    and a.value == inst.origin:
                target = d.get_DIE_from_attribute("DW_AT_abstract_origin")
                assert target.cu.cu_offset != cu.cu_offset
                forms.add(target.attributes["DW_AT_name"].value.decode() if "DW_AT_name" in target.attributes
                          else None)
        assert forms, (unit.name, name)
    # attributed: to its callee, and its bytes to the function symbol (nm -S) its code sits in
    got = inline_cost(image)
    mine = [c for c in got.callees.values() if c.name == name]
    assert sum(c.instances for c in mine) >= sum(1 for c in cross if dw.name_of(c[1].origin) == name)
    # declared where its own unit is (mm/page_alloc.c from the tree's top, as in the unit itself),
    # one key with the instances of every unit, not one more for the importing backend's unit
    assert len(mine) == 1 and "/" in mine[0].decl_file and origin_unit.name.endswith("/" + mine[0].decl_file), \
        [(c.decl_file, c.instances) for c in mine]
    lo = min(a for a, b in inst.ranges if b > a)
    nm = subprocess.run(["nm", "-S", str(image)], capture_output=True, text=True, check=True).stdout
    holder = next(ln.split()[3] for ln in nm.splitlines()
                  if len(ln.split()) == 4 and ln.split()[2] in "tT"
                  and int(ln.split()[0], 16) <= lo < int(ln.split()[0], 16) + int(ln.split()[1], 16))
    assert any(c.callers.get(holder, 0) > 0 for c in mine), (name, holder)
    # and the store holds that same attribution for the vmlinux build
    with open_store(db, read_only=True) as store:
        v = store.find_build("linux-6.1", shas[1], TC, cfg.key, "vmlinux")
        stored = to_inline_cost(store.inline_costs_for(v.id))
    assert stored is not None
    key = lambda cs: sorted((c.decl_file or "", c.instances, c.bytes) for c in cs)  # noqa: E731
    assert key(c for c in stored.callees.values() if c.name == name) == key(mine)


@_kernel
def test_link_remarks_are_ld_lld_s_for_the_allocator_unit(thin):
    """The vmlinux's inline report under ThinLTO is ld.lld's own (``--opt-remarks-filename`` given
    through LD): the YAML of the backend task that compiled mm/page_alloc.c, every remark of it
    stored with the build, the allocator's functions among their callers."""
    import re
    from analyzer.remarks import read_remarks
    from db.store import open_store
    from toolchains.build import BuildOptions, layout
    tree, shas, images, build_dir, db, _, cfg = thin
    report = layout(tree, TC, cfg, BuildOptions()).out_dir(shas[1]) / "vmlinux.remarks"
    text = report.read_text()
    assert text.startswith("--- !") and "Pass:            inline" in text
    docs = len(re.findall(r"^--- !\w+\nPass:\s+inline$", text, re.M))
    files = Counter(m for m in re.findall(r"File:\s+'?([^',}]+)", text))
    assert max(files, key=files.get).endswith("mm/page_alloc.c"), files.most_common(3)
    remarks = read_remarks(report)
    assert len(remarks) == docs > 100 and {r.compiler for r in remarks} == {"clang"}
    with open_store(db, read_only=True) as store:
        v = store.find_build("linux-6.1", shas[1], TC, cfg.key, "vmlinux")
        rows = store.remarks_for(v.id)
        outl = {f.name for f in store.functions_for(v.id) if f.out_of_line}
    # stored as an object's are: the link's "not inlined" verdicts on functions with an out-of-line
    # copy, once per (callee, caller, reason)
    want = {(r.callee, r.caller, r.reason) for r in remarks if r.decision == "not_inlined" and r.callee in outl}
    assert {(r.callee, r.caller, r.reason) for r in rows} == want and len(rows) == len(want) > 20
    assert {"__alloc_pages_slowpath", "get_page_from_freelist"} & {r.caller for r in rows}


@_kernel
def test_thinlto_link_moves_are_nm_with_promoted_statics_as_one_function(thin):
    """The hot functions' moves between the ThinLTO base and patch 1 equal nm -n -S's (tests/link_oracles.py),
    with ``NAME.llvm.<hash>`` named as bloat-o-meter names it: the patch re-hashes page_alloc.c's promoted
    statics (``__drain_all_pages.llvm.<n>``), which before read as one function removed and another added."""
    import re
    from analyzer.hotpaths import HotPaths
    from analyzer.link_layout import compare, file_layout
    from link_oracles import assert_moves_are_nm, nm_moves
    _, _, images, _, _, _, _ = thin
    promoted = [{ln.split()[2] for ln in subprocess.run(["nm", str(p)], capture_output=True, text=True,
                                                         check=True).stdout.splitlines()
                 if re.search(r"\.llvm\.[0-9]+$", ln)} for p in images]
    assert promoted[0] and promoted[0] != promoted[1]                   # the hashes did change
    hot = HotPaths()
    _, tb = file_layout(images[0], hot)
    _, th = file_layout(images[1], hot)
    moves = compare(tb, th, hot)
    assert_moves_are_nm(moves, nm_moves(images[0], images[1], hot.__contains__))
    assert any(m.moved for m in moves)
    assert not [c.name for m in moves for c in m.causes if re.search(r"\.llvm\.[0-9]+$", c.name)]
    assert all(m.by_added == 0 and m.by_removed == 0 for m in moves)

"""The arm64 allocator vmlinux (issue 30): the example series through ``sizewatch run --arch arm64
--targets vmlinux --config allocator``, checked against the oracles: the vmlinux table against
scripts/bloat-o-meter with the cross nm, calls against ``aarch64-linux-gnu-objdump -dr``, the
function alignment against the compiler's own ``-S`` directives and ``nm -n -S`` addresses, inline
counts against pyelftools.

CI builds ONE arm64 kernel: gcc-12's (``slow``: ~4 min with -j2 the first time, then from the
cache, tests/kernel_images.py). clang-19's is a second kernel build: opt-in, ``pytest -m arm64_clang``.
"""
from __future__ import annotations

import json
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from conftest import EXAMPLE_MBOX, sizewatch_cmd

CROSS = "aarch64-linux-gnu-"
TOOLCHAINS = [pytest.param("gcc-12", marks=[pytest.mark.kernel, pytest.mark.slow]),
              pytest.param("clang-19", marks=[pytest.mark.kernel, pytest.mark.slow, pytest.mark.arm64_clang])]
# what each compiler's -S output puts before every function of mm/page_alloc.c (unit, max skip)
ALIGN = {"gcc-12": (16, 11), "clang-19": (4, 3)}


def arm64_config():
    from toolchains.kbuild import preset
    return preset("allocator", arch="arm64")


@pytest.fixture(scope="module", params=TOOLCHAINS)
def run(request, tmp_path_factory):
    """The arm64 allocator vmlinux at each commit of the series (built once per machine, cached),
    then one ``sizewatch run --arch arm64 --targets vmlinux`` into a fresh store."""
    from kernel_images import allocator_vmlinux
    tc = request.param
    images = allocator_vmlinux(tc, config=arm64_config())
    db = tmp_path_factory.mktemp(f"a64-vmlinux-{tc}") / "store.db"
    p = subprocess.run([*sizewatch_cmd(), "run", "--arch", "arm64", "--series", str(EXAMPLE_MBOX), "--targets",
                        "vmlinux", "--config", "allocator", "--toolchains", tc, "--db", str(db), "--json"],
                       capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stderr[-2000:]
    return tc, images, db, json.loads(p.stdout)


def _part(report: dict, position: int) -> dict:
    (p,) = [p for p in report["patches"] if p["position"] == position]
    (t,) = [t for t in p["toolchains"] if t["target"] == "vmlinux"]
    return t


def _facts(db: Path, tc: str, sha: str):
    from analyzer.inlines import ObjectFacts
    from db.store import open_store
    with open_store(db, read_only=True) as store:
        b = store.find_build("linux-6.1", sha, tc, arm64_config().key, "vmlinux")
        assert b is not None and b.status == "ok", (tc, sha[:12])
        return ObjectFacts.from_dict(store.object_facts(b.id)["vmlinux"])


def nm_n(path: Path) -> list[tuple[int, int, str]]:
    """(address, size, name) of the sized text symbols, ``nm -n -S`` order (the cross nm)."""
    out = []
    for ln in subprocess.run([CROSS + "nm", "-n", "-S", str(path)], capture_output=True, text=True,
                             check=True).stdout.splitlines():
        f = ln.split()
        if len(f) == 4 and f[2] in "tTwW":
            out.append((int(f[0], 16), int(f[1], 16), f[3]))
    return out


@pytest.mark.timeout(3600)
def test_report_is_arm64_and_the_table_is_bloat_o_meter(run, bloat_o_meter):
    tc, images, _, report = run
    for pos in (1, 2):
        part = _part(report, pos)
        assert part["status"] == "ok" and part["config"].startswith("allocator-arm64-"), part["status"]
        ref = bloat_o_meter("-p", CROSS, images.vmlinux[pos - 1], images.vmlinux[pos])
        assert ref.returncode == 0 and ref.stdout.startswith(b"add/remove: "), ref.stderr
        assert part["bloat_text"] == ref.stdout.decode(), (tc, pos)
    # patch 2 (__always_inline) takes every out-of-line __rmqueue helper of patch 1 back in
    rows = {pos: {r["name"]: (r["old"], r["new"]) for r in _part(report, pos)["tables"][0]["rows"]} for pos in (1, 2)}
    outlined = {n for n, (old, new) in rows[1].items() if n.startswith("__rmqueue") and old is None}
    gone = {n for n, (old, new) in rows[2].items() if n.startswith("__rmqueue") and new is None}
    assert outlined and gone == outlined, (tc, outlined, gone)


@pytest.mark.timeout(3600)
def test_calls_and_inline_counts(run):
    """Direct calls made by the allocator's functions, per aarch64-linux-gnu-objdump -dr of the
    whole vmlinux (aliases at one address, e.g. memcpy/__memcpy, named once by address); inlined
    copies per function as pyelftools counts the unit's DW_TAG_inlined_subroutine."""
    from analyzer.calls import call_graph
    from analyzer.elf import load_images, read_symtab
    from inline_oracles import dwarf_inlines, objdump_calls_a64
    tc, images, db, _ = run
    v = images.vmlinux[1]
    facts = _facts(db, tc, images.shas[1])
    assert facts.arch == "aarch64" and facts.linked and facts.placed
    at: dict[str, int] = {}
    for a, _, n in nm_n(v):
        at.setdefault(n, a)
    first: dict[int, str] = {}
    for n, a in sorted(at.items()):
        first.setdefault(a, n)

    def canon(counts: Counter) -> Counter:
        return Counter({(c, first.get(at.get(t, -1), t)): k for (c, t), k in counts.items() if c in callers})
    callers = {p.symbol for f in facts.functions.values() for p in f.pieces}
    assert len(callers) > 100, len(callers)
    img = load_images(v)[0]
    ours = canon(Counter((c.caller, c.target) for c in call_graph(img, read_symtab(img)).sites if c.kind == "call"))
    assert ours == canon(objdump_calls_a64(v)) and sum(ours.values()) > 300, tc
    inl = dwarf_inlines(v, "mm/page_alloc.c")
    checked = 0
    for name, where in inl.items():
        if name in facts.functions:
            assert facts.functions[name].inlined_count == sum(where.values()), (tc, name)
            checked += 1
    assert checked > 100, checked


def _compiler_asm(tc: str, images, dest: Path) -> tuple[str, list[str]]:
    """mm/page_alloc.c compiled with -S by the build dir's own command (mm/.page_alloc.o.cmd):
    (the assembly, the command)."""
    from toolchains.build import BuildOptions, layout
    from toolchains.cmdfile import cmdfile_path, parse
    from toolchains.locks import file_lock
    lay = layout(images.tree, tc, arm64_config(), BuildOptions())
    with file_lock(lay.worktree_lock), file_lock(lay.lock):
        rec = parse(cmdfile_path(lay.build_dir, "mm/page_alloc.o").read_text(), "mm/page_alloc.o")
        args = shlex.split(rec.compile_part)
        out = dest / "page_alloc.s"
        new = []
        for a in args:
            if a.startswith("-Wp,-MMD,"):
                a = f"-Wp,-MMD,{dest}/page_alloc.d"
            elif a == "mm/page_alloc.o":
                a = str(out)
            elif a == "-c":
                a = "-S"
            new.append(a)
        subprocess.run(new, cwd=lay.build_dir, check=True, capture_output=True)
        config = (lay.build_dir / ".config").read_text().splitlines()
    return out.read_text(), args + config


@pytest.mark.timeout(3600)
def test_alignment_is_the_compilers_and_the_layout_nms(run, tmp_path):
    """The function alignment read from vmlinux is what the compiler's -S of mm/page_alloc.c says
    before every function; every allocator function's placement is at its nm address; between
    neighbours of the unit's .text the padding is what that alignment prescribes (gcc-12: some
    functions left unpadded, 12 bytes would be needed); the boundary findings carry that unit."""
    from analyzer.func_align import from_asm, from_command
    from inline_oracles import objdump_symbols
    from toolchains.build import BuildOptions, layout
    tc, images, db, report = run
    # the unit's .text (gcc moves some functions to .text.unlikely, .init.text...: aligned to 4
    # only), per the cross objdump -t of the build dir's mm/page_alloc.o
    obj = layout(images.tree, tc, arm64_config(), BuildOptions()).build_dir / "mm" / "page_alloc.o"
    text = {n for _v, _s, n in objdump_symbols(obj, CROSS + "objdump").get(".text", [])}
    text_s, cmd_and_config = _compiler_asm(tc, images, tmp_path)
    # 6.1 on arm64 asks for no function alignment (no CONFIG_FUNCTION_ALIGNMENT before 6.2, the
    # 64-byte debug option off): the compiler's default is what the file shows
    assert from_command(cmd_and_config, 4) is None
    assert "# CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B is not set" in cmd_and_config
    assert not [ln for ln in cmd_and_config if ln.startswith("CONFIG_FUNCTION_ALIGNMENT")]
    asm = from_asm(text_s, "aarch64")
    stated = {(a.unit, a.max_skip) for n, a in asm.items() if n in text}
    assert stated == {ALIGN[tc]} and len(text) > 100, stated
    pos = 2
    v = images.vmlinux[pos]
    facts = _facts(db, tc, images.shas[pos])
    assert (facts.align.unit, facts.align.max_skip, facts.align.granule) == (*ALIGN[tc], 4)
    syms = nm_n(v)
    where: dict[str, set] = {}
    for a, z, n in syms:                   # static helpers of one name exist in many units
        where.setdefault(n, set()).add((a, z))
    pieces = {p.symbol: p for f in facts.functions.values() for p in f.pieces}
    for sym, p in pieces.items():
        a, z = p.placement.offset, p.size
        assert (a, z) in where[sym], sym
        assert p.placement.lines == (a + z - 1) // 64 - a // 64 + 1, sym
        assert p.placement.blocks == (a + z - 1) // ALIGN[tc][0] - a // ALIGN[tc][0] + 1, sym
    pairs = skipped = 0
    for (a, z, n), (b, _, m) in zip(syms, syms[1:]):
        if n in pieces and m in pieces and n in text and m in text:
            assert b - (a + z) == facts.align.pad(a + z), (n, m)
            pairs += 1
            skipped += -(a + z) % facts.align.unit > facts.align.max_skip
    assert pairs > 100 and (skipped > 0) == (tc == "gcc-12"), (pairs, skipped)
    # patch 2 grows the hot get_page_from_freelist by kilobytes: its crossing names the arm64 unit
    (gpff,) = [f for f in _part(report, pos)["findings"]
               if f["kind"] == "boundary_crossing" and f["function"] == "get_page_from_freelist"]
    p = facts.functions["get_page_from_freelist"].placement
    assert gpff["message"].endswith(f"headroom now {p.headroom} bytes to the next {ALIGN[tc][0]}-byte boundary, "
                                    f"{p.line_headroom} to the next cache line"), gpff["message"]

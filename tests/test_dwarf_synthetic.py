"""DWARF written from data (tests/dwarfwriter.py), read back by the fast walker and by pyelftools.

Every form the walker decodes, in DWARF 4 and 5 units of 32- and 64-bit DWARF, must come back
exactly as written from both readers, and readelf must parse the file without a warning. The
inline facts (subprograms, inlined instances, ranges, file names) are checked against what the
test wrote, for both engines of ``read_dwarf``.
"""
from __future__ import annotations

import re
import subprocess

import pytest
from conftest import NATIVE
from dwarfwriter import DwarfAttrib, DwarfDie, DwarfUnit, compile_dwarf, dwarf_layout

from analyzer.dwarf import InlinedInstance, Subprogram, read_dwarf
from analyzer.dwarf.encoding import FORM, FORM_NAME
from analyzer.dwarf.walker import Walker
from analyzer.elf import load_images, read_symtab

KINDS = [(4, 4), (4, 8), (5, 4), (5, 8)]
KIND_IDS = ["dwarf4-32", "dwarf4-64", "dwarf5-32", "dwarf5-64"]
USER_AT = 0x3F00            # DW_AT_lo_user range: attributes no reader gives a meaning to

COMMON = [("addr", 0x1234_5678_9ABC), ("data1", 0xAB), ("data2", 0xBEEF), ("data4", 0xDEADBEEF),
          ("data8", 0x0123_4567_89AB_CDEF), ("udata", 624485), ("sdata", -123456), ("flag", True),
          ("flag_present", True), ("string", "inline string"), ("strp", "a .debug_str string"),
          ("block1", b"\x01\x02"), ("block2", b"\x03" * 300), ("block4", b"\x04\x05\x06"),
          ("block", b"\x07\x08"), ("exprloc", b"\x91\x7c"), ("sec_offset", 0x42),
          ("ref1", "target"), ("ref2", "target"), ("ref4", "target"), ("ref8", "target"),
          ("ref_udata", "target"), ("ref_addr", "other")]
V5_ONLY = [("strx", "strx value"), ("strx1", "strx1 value"), ("strx2", "strx2 value"), ("strx3", "strx3 value"),
           ("strx4", "strx4 value"), ("addrx", 0x1000), ("addrx1", 0x2000), ("addrx2", 0x3000),
           ("addrx3", 0x4000), ("addrx4", 0x5000), ("data16", bytes(range(16))), ("implicit_const", -77),
           ("line_strp", "a .debug_line_str string"), ("rnglistx", [(0x10, 0x20), (0x30, 0x38)])]


def forms_for(version: int) -> list[tuple[str, object]]:
    return COMMON + (V5_ONLY if version >= 5 else [])


# pyelftools 0.33 decodes DW_FORM_strx4 as 8 bytes (structs.py: ``DW_FORM_strx4=self.Dwarf_uint64('')``,
# quoted in eliben/pyelftools#629), so it misreads every attribute after one: strx4 sits in a DIE of
# its own, read back by the walker and readelf only
PYELFTOOLS_MISREADS = ("strx4",)


def form_units(version: int, osz: int) -> list[DwarfUnit]:
    attribs = [DwarfAttrib(USER_AT + i, form, value) for i, (form, value) in enumerate(forms_for(version))]
    main = DwarfDie("compile_unit", [DwarfAttrib("name", "string", "forms.c")], [
        DwarfDie("base_type", [DwarfAttrib("name", "string", "int")], label="target"),
        DwarfDie("variable", [a for a in attribs if a.form not in PYELFTOOLS_MISREADS], label="holder"),
        DwarfDie("variable", [a for a in attribs if a.form in PYELFTOOLS_MISREADS], label="misread")])
    other = DwarfDie("compile_unit", [DwarfAttrib("name", "string", "other.c")], [
        DwarfDie("base_type", [DwarfAttrib("name", "string", "long")], label="other")])
    return [DwarfUnit(main, version, osz, files=("forms.c",)), DwarfUnit(other, version, osz, files=("other.c",))]


def expected_values(version: int, labels: dict[str, int], rnglists_offset, misread: bool = False):
    out = []
    for i, (form, value) in enumerate(forms_for(version)):
        if (form in PYELFTOOLS_MISREADS) != misread:
            continue
        if form.startswith("ref"):
            value = labels[value]
        elif form == "rnglistx":
            value = rnglists_offset
        out.append((USER_AT + i, FORM[form], value))
    return out


def pyelftools_values(path, offset: int) -> list[tuple[int, int, object]]:
    """The attributes of the DIE at ``offset`` as pyelftools decodes them, normalised to the
    writer's terms (text, absolute references, bytes)."""
    from elftools.dwarf.enums import ENUM_DW_AT, ENUM_DW_FORM
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        di = ELFFile(f).get_dwarf_info(relocate_dwarf_sections=False)
        for cu in di.iter_CUs():
            for die in cu.iter_DIEs():
                if die.offset != offset:
                    continue
                out = []
                for attr in die.attributes.values():
                    at = attr.name if isinstance(attr.name, int) else ENUM_DW_AT[attr.name]
                    fm = ENUM_DW_FORM[attr.form]
                    v = attr.value
                    if attr.form in ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8",
                                     "DW_FORM_ref_udata"):
                        v += cu.cu_offset
                    elif isinstance(v, bytes):
                        v = v.decode()
                    elif isinstance(v, list):
                        v = bytes(v)
                    out.append((at, fm, v))
                return out
    raise AssertionError(f"pyelftools found no DIE at {offset:#x}")


@pytest.mark.parametrize("version,osz", KINDS, ids=KIND_IDS)
def test_every_form_reads_back(tmp_path, version, osz):
    units = form_units(version, osz)
    secs, labels = dwarf_layout(units)
    path = compile_dwarf(units, tmp_path / "forms.o")
    img = load_images(path)[0]
    walker = Walker(secs, True)
    headers = list(walker.units())
    assert [(h.version, h.offset_size, h.address_size) for h in headers] == [(version, osz, 8)] * 2
    holder = next(d for d in walker.dies(headers[0]) if d[0] == labels["holder"])
    rng = next((v for at, fm, v in holder[3] if fm == FORM["rnglistx"]), None)
    want = expected_values(version, labels, rng)
    assert holder[3] == want
    assert pyelftools_values(path, labels["holder"]) == want
    misread = next(d for d in walker.dies(headers[0]) if d[0] == labels["misread"])
    assert misread[3] == expected_values(version, labels, rng, misread=True)
    assert img.section_by_name(".debug_info") is not None
    if version >= 5:      # the rnglistx list is where its offset says: pyelftools reads it there too
        from elftools.elf.elffile import ELFFile
        with open(path, "rb") as f:
            di = ELFFile(f).get_dwarf_info(relocate_dwarf_sections=False)
            entries = di.range_lists().get_range_list_at_offset(rng, cu=next(di.iter_CUs()))
            assert [(e.begin_offset, e.end_offset) for e in entries] == [(0x10, 0x20), (0x30, 0x38)]
    readelf_parses(path, [v for f, v in forms_for(version) if isinstance(v, str) and not f.startswith("ref")])
    shown = readelf_values(path)
    for at, fm, v in want + expected_values(version, labels, rng, misread=True):
        assert readelf_means(shown[at], fm, v), (hex(at), FORM_NAME[fm], v, shown[at])


def readelf_values(path) -> dict[int, str]:
    """What readelf prints for each of our user attributes (``Unknown AT value: 3f05: 624485``)."""
    r = subprocess.run(["readelf", "--debug-dump=info", str(path)], capture_output=True, text=True, check=True)
    return {int(m[1], 16): m[2].strip() for m in re.finditer(r"Unknown AT value: ([0-9a-f]+): (.*)", r.stdout)}


def readelf_means(text: str, fm: int, value) -> bool:
    """Does readelf's rendering of an attribute say ``value``?"""
    form = FORM_NAME[fm]
    if isinstance(value, str):                          # every string form: the text ends the line
        return text == value or text.endswith(f"): {value}")
    if form in ("block1", "block2", "block4", "block", "exprloc"):
        m = re.match(r"(\d+) byte block: ?(.*)", text)
        return bool(m) and bytes(int(x, 16) for x in m[2].split()) == value and int(m[1]) == len(value)
    if form == "data16":
        return int(text, 16) == int.from_bytes(value, "little")
    token = text.rsplit(": ", 1)[-1].strip("<>")          # "(index: 0x1): 0x2000", "<0x41>", "-77"
    return int(token, 0) == int(value)


def readelf_parses(path, strings: list[str]) -> None:
    """readelf as a third reader: no warning, and every string where it belongs."""
    r = subprocess.run(["readelf", "--debug-dump=info", "--debug-dump=line", str(path)], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "Warning" not in r.stderr and "Error" not in r.stderr, r.stderr
    for s in strings:
        assert s in r.stdout, s


# --- the inline facts -----------------------------------------------------------------------

def facts_units(version: int, osz: int) -> list[DwarfUnit]:
    """A unit shaped like a compiler's: an abstract inline function, a declaration with a
    specification, a concrete function holding nested inlined instances (one with ranges),
    and a second unit whose inlined instance names the first unit's function by ref_addr."""
    v5 = version >= 5
    name = "strx1" if v5 else "strp"
    ranges_form = "rnglistx" if v5 else "sec_offset"
    lo_form = "addrx" if v5 else "addr"
    inline_form = "implicit_const" if v5 else "data1"
    files = ("mm/page_alloc.c", "include/linux/mmzone.h")
    decl_file = 1       # v4: 1-based (file 1 is page_alloc.c); v5: 0 is the primary file, 1 mmzone.h
    cu = DwarfDie("compile_unit", [
        DwarfAttrib("producer", "strp", "dwarfwriter"), DwarfAttrib("name", name, "mm/page_alloc.c"),
        DwarfAttrib("comp_dir", "line_strp" if v5 else "strp", "/linux"), DwarfAttrib("low_pc", "addr", 0)], [
        DwarfDie("subprogram", [DwarfAttrib("name", name, "rmqueue_smallest"), DwarfAttrib("decl_file", "data1", decl_file),
                                DwarfAttrib("decl_line", "data2", 2300), DwarfAttrib("inline", inline_form, 3)],
                 label="smallest"),
        DwarfDie("subprogram", [DwarfAttrib("name", "string", "del_page"), DwarfAttrib("decl_file", "udata", 1),
                                DwarfAttrib("decl_line", "udata", 900), DwarfAttrib("inline", "data1", 1)],
                 label="del_page"),
        DwarfDie("subprogram", [DwarfAttrib("name", name, "get_page"), DwarfAttrib("external", "flag_present", True),
                                DwarfAttrib("declaration", "flag", True), DwarfAttrib("decl_line", "data4", 40),
                                DwarfAttrib("linkage_name", "strp", "get_page")], label="decl"),
        DwarfDie("subprogram", [DwarfAttrib("specification", "ref_udata", "decl"),
                                DwarfAttrib("low_pc", lo_form, 0x100), DwarfAttrib("high_pc", "data4", 0x80)], [
            DwarfDie("inlined_subroutine", [
                DwarfAttrib("abstract_origin", "ref4", "smallest"), DwarfAttrib("ranges", ranges_form,
                                                                                [(0x110, 0x130), (0x160, 0x170)]),
                DwarfAttrib("call_file", "data1", 2 if not v5 else 1), DwarfAttrib("call_line", "data2", 3000)], [
                DwarfDie("lexical_block", [], [
                    DwarfDie("inlined_subroutine", [
                        DwarfAttrib("abstract_origin", "ref2", "del_page"), DwarfAttrib("low_pc", "addr", 0x118),
                        DwarfAttrib("high_pc", "udata", 8), DwarfAttrib("call_line", "udata", 2320)])])]),
            DwarfDie("formal_parameter", [DwarfAttrib("name", "string", "order"),
                                          DwarfAttrib("location", "exprloc", b"\x55")])], label="concrete"),
    ])
    other = DwarfDie("compile_unit", [DwarfAttrib("name", "string", "mm/other.c"), DwarfAttrib("low_pc", "addr", 0)], [
        DwarfDie("subprogram", [DwarfAttrib("name", "string", "caller"), DwarfAttrib("low_pc", "addr", 0x400),
                                DwarfAttrib("high_pc", "addr", 0x440)], [
            DwarfDie("inlined_subroutine", [DwarfAttrib("abstract_origin", "ref_addr", "smallest"),
                                            DwarfAttrib("low_pc", "addr", 0x404), DwarfAttrib("high_pc", "data1", 12),
                                            DwarfAttrib("call_line", "data2", 7)])], label="caller")])
    return [DwarfUnit(cu, version, osz, files=files, comp_dir="/linux", md5=v5),
            DwarfUnit(other, version, osz, files=("mm/other.c",))]


def expected_facts(version: int, labels: dict[str, int]):
    v5 = version >= 5
    header = "include/linux/mmzone.h"          # a relative directory entry stays relative
    first = header if v5 else "mm/page_alloc.c"   # decl_file 1: v5 counts from the primary file at 0
    sps = {
        labels["smallest"]: Subprogram(labels["smallest"], "rmqueue_smallest", None, first, 2300, 3),
        labels["del_page"]: Subprogram(labels["del_page"], "del_page", None, first, 900, 1),
        labels["decl"]: Subprogram(labels["decl"], "get_page", "get_page", None, 40, None, True, True),
        labels["concrete"]: Subprogram(labels["concrete"], None, None, None, None, None, False, False,
                                       [(0x100, 0x180)], labels["decl"]),
    }
    inlined = [InlinedInstance(labels["smallest"], labels["concrete"], None, [(0x110, 0x130), (0x160, 0x170)],
                               header, 3000),
               InlinedInstance(labels["del_page"], labels["concrete"], labels["smallest"], [(0x118, 0x120)], None,
                               2320)]
    other_sp = {labels["caller"]: Subprogram(labels["caller"], "caller", None, None, None, None, False, False,
                                             [(0x400, 0x440)])}
    other_in = [InlinedInstance(labels["smallest"], labels["caller"], None, [(0x404, 0x410)], None, 7)]
    return ([("mm/page_alloc.c", "/linux", "dwarfwriter"), ("mm/other.c", None, None)], {**sps, **other_sp},
            [inlined, other_in])


@pytest.mark.parametrize("engine", ["fast", "pyelftools", NATIVE])
@pytest.mark.parametrize("version,osz", KINDS, ids=KIND_IDS)
def test_inline_facts(tmp_path, version, osz, engine):
    units = facts_units(version, osz)
    _secs, labels = dwarf_layout(units)
    path = compile_dwarf(units, tmp_path / "facts.o", [("get_page", 0x100, 0x80), ("caller", 0x400, 0x40)])
    img = load_images(path)[0]
    facts = read_dwarf(img, read_symtab(img), engine=engine)
    names, sps, inlined = expected_facts(version, labels)
    assert [(u.name, u.comp_dir, u.producer) for u in facts.units] == names
    assert facts.subprograms == sps
    assert [u.inlined for u in facts.units] == inlined
    assert facts.name_of(labels["concrete"]) == "get_page" and facts.decl_of(labels["concrete"]) == (None, 40)
    readelf_parses(path, ["rmqueue_smallest", "del_page", "get_page", "caller", "mmzone.h"])
    restricted = read_dwarf(img, read_symtab(img), cus=("mm/other.c",), engine=engine)
    assert [u.inlined for u in restricted.units] == inlined[1:]

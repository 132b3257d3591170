"""The fast DIE walker and the libdw engine against pyelftools' decoding of the same
(numpy-relocated) sections; the libdw engine against the walker on a whole Debian vmlinux."""
from __future__ import annotations

import pytest

from analyzer.dwarf import read_dwarf
from analyzer.elf import load_images, read_symtab
from conftest import FIXTURES, NATIVE


ENGINES = ["fast", NATIVE]


def both(path, engine: str = "fast"):
    img = load_images(path)[0]
    table = read_symtab(img)
    return read_dwarf(img, table, engine="pyelftools"), read_dwarf(img, table, engine=engine)


def assert_same(ref, fast):
    assert [(u.name, u.comp_dir, u.producer) for u in ref.units] == [(u.name, u.comp_dir, u.producer) for u in fast.units]
    assert ref.subprograms == fast.subprograms
    # in the same order too: analyze() takes the first declaration it meets
    assert [list(u.subprograms.items()) for u in ref.units] == [list(u.subprograms.items()) for u in fast.units]
    assert [u.inlined for u in ref.units] == [u.inlined for u in fast.units]


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
@pytest.mark.parametrize("flags", [(), ("-gdwarf-4",), ("-ffunction-sections",), ("-gdwarf-4", "-ffunction-sections")],
                         ids=["dwarf5", "dwarf4", "dwarf5-fs", "dwarf4-fs"])
@pytest.mark.parametrize("engine", ENGINES)
def test_fixture_objects(compile_c, cc, flags, engine):
    obj = compile_c(cc, FIXTURES / "inline_cases.c", *flags, name=f"walk-{cc}-{'-'.join(flags) or 'plain'}.o")
    ref, fast = both(obj, engine)
    assert_same(ref, fast)
    assert any(i.ranges for u in fast.units for i in u.inlined)       # the fixture exercises ranges


@pytest.mark.kernel
@pytest.mark.parametrize("tc", ["gcc-12", "clang-19"])
@pytest.mark.parametrize("engine", ENGINES)
def test_kernel_objects(example_series, tc, engine):
    for built in example_series(tc):
        ref, fast = both(built.object_path, engine)
        assert_same(ref, fast)
        assert len(fast.units[0].inlined) > 1000


def _offsets(ranges):
    """Addresses as offsets in their section: our relocation adds the section index << 32 (the
    "virtual link" of analyzer.relocs), pyelftools' own relocation gives the offset alone."""
    return [(lo & 0xFFFFFFFF, hi & 0xFFFFFFFF) for lo, hi in ranges]


def _normalised(units):
    sps = {off: (sp.name, sp.linkage_name, sp.decl_file, sp.decl_line, sp.inline, sp.external, sp.declaration,
                 _offsets(sp.ranges), sp.origin) for u in units for off, sp in u.subprograms.items()}
    inl = [[(i.origin, i.container, i.parent_origin, _offsets(i.ranges), i.call_file, i.call_line)
            for i in u.inlined] for u in units]
    return [(u.name, u.comp_dir, u.producer) for u in units], sps, inl


@pytest.mark.kernel
def test_pyelftools_relocating_itself(example_series):
    """The walker over our numpy relocation against pyelftools applying the relocations itself
    (its own ``relocate_dwarf_sections``), on the gcc-12 page_alloc.o of each commit of the
    example series: the same units, subprograms and inlined instances, exactly."""
    from collections import Counter

    from elftools.elf.elffile import ELFFile

    from analyzer.dwarf.reference import read_units
    for built in example_series("gcc-12"):
        obj = built.object_path
        img = load_images(obj)[0]
        fast = read_dwarf(img, read_symtab(img))
        with open(obj, "rb") as f:
            elf = ELFFile(f)
            assert elf.get_section_by_name(".rela.debug_info").num_relocations() > 10000
            ref_units = read_units(elf.get_dwarf_info(relocate_dwarf_sections=True), None)
        ref, ours = _normalised(ref_units), _normalised(fast.units)
        assert ours[0] == ref[0]
        assert ours[1] == ref[1]
        assert ours[2] == ref[2]
        assert [len(u.inlined) for u in fast.units] == [len(u.inlined) for u in ref_units]
        assert (Counter(i.origin for u in fast.units for i in u.inlined)
                == Counter(i.origin for u in ref_units for i in u.inlined))
        assert sum(len(u.inlined) for u in fast.units) > 1000 and any(sp.ranges for sp in fast.subprograms.values())


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.libdw
def test_native_debian_vmlinux():
    """The Debian dbg vmlinux (bench/dbg_vmlinux.py: the newest cached, else the archive's newest):
    libdw's reading equals pyelftools' on mm/page_alloc.c and the walker's on every unit, and the
    units and inlined instances are as many as llvm-dwarfdump-19 prints (tests/dbg_oracles.py)."""
    from dbg_oracles import dbg_image, dwarfdump_summary
    path = dbg_image().path
    want = dwarfdump_summary(path)
    img = load_images(path)[0]
    table = read_symtab(img)
    unit = ("mm/page_alloc.c",)
    got = read_dwarf(img, table, unit, engine="native")
    assert_same(read_dwarf(img, table, unit, engine="pyelftools"), got)
    (page_alloc,) = [n for name, n in want.units if name.endswith("/mm/page_alloc.c") or name == "mm/page_alloc.c"]
    assert len(got.units) == 1 and len(got.units[0].inlined) == page_alloc > 0
    whole = read_dwarf(img, table, engine="native")
    assert [(u.name, len(u.inlined)) for u in whole.units] == want.units
    assert_same(read_dwarf(img, table, engine="fast"), whole)


def test_the_walker_takes_over_a_file_libdw_refuses(compile_c, monkeypatch):
    """engine "auto": when libdw refuses a file part-way (here: every unit), the walker reads it
    and gives the same facts; a selected decode asks its ``select`` once (a per-unit cache's
    lookups are not repeated)."""
    from analyzer.dwarf import read as rd
    from analyzer.dwarf import load_sections, scan_unit_names
    from analyzer.errors import InputError
    obj = compile_c("gcc-12", FIXTURES / "inline_cases.c", name="refused.o")
    img = load_images(obj)[0]
    table = read_symtab(img)

    class Refusing:
        def unit_names(self):
            return scan_unit_names(load_sections(img, table), img.little)

        def unit(self, _offset):
            raise InputError("corrupt DWARF (libdw: refused for the test)")

        def units(self, _wanted=None):
            raise InputError("corrupt DWARF (libdw: refused for the test)")

    monkeypatch.setattr(rd, "native_usable", lambda _img: True)
    monkeypatch.setattr(rd, "native_reader", lambda _img, _table: Refusing())
    asked = []

    def select(units):
        asked.append(len(units))
        return {off for off, _name in units}

    dw, by_off = rd.read_dwarf_selected(img, table, select, engine="auto")
    assert len(asked) == 1 and by_off
    walked = read_dwarf(img, table, engine="fast")
    assert [u.inlined for u in dw.units] == [u.inlined for u in walked.units]
    assert read_dwarf(img, table, engine="auto").subprograms == walked.subprograms
    with pytest.raises(InputError, match="refused for the test"):
        read_dwarf(img, table, engine="native")

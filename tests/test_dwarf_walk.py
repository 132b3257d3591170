"""The fast DIE walker and the libdw engine against pyelftools reading the file by itself (a
``.o``'s DWARF relocated by pyelftools' own ``relocate_dwarf_sections``: tests/pyelftools_dwarf.py,
never the analyzer's relocation); the libdw engine against the walker on a whole Debian vmlinux."""
from __future__ import annotations

import functools

import pytest

from analyzer.dwarf import read_dwarf
from analyzer.elf import load_images, read_symtab
from analyzer.dwarf.reference import read_units
from conftest import FIXTURES, NATIVE
from pyelftools_dwarf import pyelftools_dwarf


ENGINES = ["fast", NATIVE]


def both(path, engine: str = "fast"):
    """pyelftools' own reading of ``path`` (its relocation, its DIE decoding) and ``engine``'s."""
    img = load_images(path)[0]
    return read_units(pyelftools_dwarf(path), None), read_dwarf(img, read_symtab(img), engine=engine)


def assert_same(ref, fast):
    """``ref``: pyelftools' units (read_units) or a DwarfFacts; every unit, subprogram and
    inlined instance equal, addresses included."""
    ref = getattr(ref, "units", ref)
    assert [(u.name, u.comp_dir, u.producer) for u in ref] == [(u.name, u.comp_dir, u.producer) for u in fast.units]
    assert {off: sp for u in ref for off, sp in u.subprograms.items()} == fast.subprograms
    # in the same order too: analyze() takes the first declaration it meets
    assert [list(u.subprograms.items()) for u in ref] == [list(u.subprograms.items()) for u in fast.units]
    assert [u.inlined for u in ref] == [u.inlined for u in fast.units]


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
@pytest.mark.parametrize("flags", [(), ("-gdwarf-4",), ("-ffunction-sections",), ("-gdwarf-4", "-ffunction-sections")],
                         ids=["dwarf5", "dwarf4", "dwarf5-fs", "dwarf4-fs"])
@pytest.mark.parametrize("engine", ENGINES)
def test_fixture_objects(compile_c, cc, flags, engine):
    obj = compile_c(cc, FIXTURES / "inline_cases.c", *flags, name=f"walk-{cc}-{'-'.join(flags) or 'plain'}.o")
    ref, fast = both(obj, engine)
    assert_same(ref, fast)
    assert any(i.ranges for u in fast.units for i in u.inlined)       # the fixture exercises ranges


@functools.lru_cache(maxsize=8)
def _pyelftools_units(path):
    return read_units(pyelftools_dwarf(path), None)


@pytest.mark.kernel
@pytest.mark.parametrize("tc", ["gcc-12", "clang-19"])
@pytest.mark.parametrize("engine", ENGINES)
def test_kernel_objects(example_series, tc, engine):
    """Each commit's page_alloc.o of the example series, our numpy relocation against pyelftools
    applying the relocations itself: the same units, subprograms and inlined instances, addresses
    included. gcc relocates its DWARF through .rela.debug_info (>10k entries); clang through
    .debug_addr and .debug_str_offsets."""
    from elftools.elf.elffile import ELFFile
    for built in example_series(tc):
        obj = built.object_path
        with open(obj, "rb") as f:
            rela = {s.name: s.num_relocations() for s in ELFFile(f).iter_sections() if s.name.startswith(".rela.debug_")}
        if tc == "gcc-12":
            assert rela[".rela.debug_info"] > 10000
        else:
            assert rela[".rela.debug_addr"] > 1000 and rela[".rela.debug_str_offsets"] > 1000
        img = load_images(obj)[0]
        ref, fast = _pyelftools_units(obj), read_dwarf(img, read_symtab(img), engine=engine)
        assert_same(ref, fast)
        assert len(fast.units[0].inlined) > 1000 and any(sp.ranges for sp in fast.subprograms.values())
        # the code sections stay apart: instances sit in more than one (.text, .init.text, ...)
        assert len({lo >> 32 for u in ref for i in u.inlined for lo, _hi in i.ranges}) > 1


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.libdw
def test_native_debian_vmlinux():
    """The Debian dbg vmlinux (bench/dbg_vmlinux.py: the newest cached, else the archive's newest):
    libdw's reading equals pyelftools' own (tests/pyelftools_dwarf.py) on mm/page_alloc.c and the walker's on every unit, and the
    units and inlined instances are as many as llvm-dwarfdump-19 prints (tests/dbg_oracles.py)."""
    from dbg_oracles import dbg_image, dwarfdump_summary
    path = dbg_image().path
    want = dwarfdump_summary(path)
    img = load_images(path)[0]
    table = read_symtab(img)
    unit = ("mm/page_alloc.c",)
    got = read_dwarf(img, table, unit, engine="native")
    di = pyelftools_dwarf(path)                 # pyelftools reading the file itself
    (off,) = [cu.cu_offset for cu in di.iter_CUs()
              if cu.get_top_DIE().attributes["DW_AT_name"].value.decode() in ("mm/page_alloc.c",)
              or cu.get_top_DIE().attributes["DW_AT_name"].value.decode().endswith("/mm/page_alloc.c")]
    assert_same(read_units(di, [off]), got)
    del di
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

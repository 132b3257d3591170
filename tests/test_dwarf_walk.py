"""The fast DIE walker against pyelftools' decoding of the same (numpy-relocated) sections."""
from __future__ import annotations

import pytest

from analyzer.dwarf import read_dwarf
from analyzer.elf import load_images, read_symtab
from conftest import FIXTURES


def both(path):
    img = load_images(path)[0]
    table = read_symtab(img)
    return read_dwarf(img, table, engine="pyelftools"), read_dwarf(img, table)


def assert_same(ref, fast):
    assert [(u.name, u.comp_dir, u.producer) for u in ref.units] == [(u.name, u.comp_dir, u.producer) for u in fast.units]
    assert ref.subprograms == fast.subprograms
    assert [u.inlined for u in ref.units] == [u.inlined for u in fast.units]


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
@pytest.mark.parametrize("flags", [(), ("-gdwarf-4",), ("-ffunction-sections",), ("-gdwarf-4", "-ffunction-sections")],
                         ids=["dwarf5", "dwarf4", "dwarf5-fs", "dwarf4-fs"])
def test_fixture_objects(compile_c, cc, flags):
    obj = compile_c(cc, FIXTURES / "inline_cases.c", *flags, name=f"walk-{cc}-{'-'.join(flags) or 'plain'}.o")
    ref, fast = both(obj)
    assert_same(ref, fast)
    assert any(i.ranges for u in fast.units for i in u.inlined)       # the fixture exercises ranges


@pytest.mark.kernel
@pytest.mark.parametrize("tc", ["gcc-12", "clang-19"])
def test_kernel_objects(example_series, tc):
    for built in example_series(tc):
        ref, fast = both(built.object_path)
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

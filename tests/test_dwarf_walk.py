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

"""sizediff = scripts/bloat-o-meter on what kernel developers compare besides objects: a linked
vmlinux (the ``allocator`` config of linux-6.1 at the example series' base and patch 1, built once
and cached) and
``.ko`` modules (tests/fixtures/kmod, two versions, built with kbuild ``M=`` against that tree).
Both oracle versions, in bloat-o-meter's four modes, both directions, byte for byte."""
from __future__ import annotations

import subprocess

import pytest

from kernel_images import build_module, tiny_vmlinux
from test_sizediff import MODES, assert_same_as_oracle

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


@pytest.fixture(scope="session")
def images():
    """~3.5 min with gcc-12 -j2 on an idle machine the first time, cached after."""
    return tiny_vmlinux()


@pytest.fixture(scope="module")
def modules(images, tmp_path_factory):
    out = tmp_path_factory.mktemp("kmod")
    return build_module(images, 1, out), build_module(images, 2, out)


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("mode", MODES, ids=lambda m: "".join(m) or "default")
def test_vmlinux_matches_bloat_o_meter(images, sizediff, bloat_o_meter, mode):
    old, new = images.vmlinux
    assert_same_as_oracle(sizediff, bloat_o_meter, old, new, *mode)
    assert_same_as_oracle(sizediff, bloat_o_meter, new, old, *mode)


def test_vmlinux_shows_the_seed_change(images, sizediff, bloat_o_meter):
    """The pair is the seed's experiment linked: the comparison above is about real changes."""
    old, new = images.vmlinux
    text = assert_same_as_oracle(sizediff, bloat_o_meter, old, new, "-c")
    rows = {ln.split()[0]: ln.split()[1:] for ln in text.splitlines()[2:] if not ln.startswith(("Total", "add/"))}
    assert rows["__rmqueue_smallest"][0] == "-"               # patch 1 pushes it out of line
    assert "get_page_from_freelist" in rows
    for path in images.vmlinux:
        kind = subprocess.run(["readelf", "-h", str(path)], capture_output=True, text=True, check=True).stdout
        assert "EXEC (Executable file)" in kind and "X86-64" in kind


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "".join(m) or "default")
def test_modules_match_bloat_o_meter(modules, sizediff, bloat_o_meter, mode):
    old, new = modules
    assert_same_as_oracle(sizediff, bloat_o_meter, old, new, *mode)
    assert_same_as_oracle(sizediff, bloat_o_meter, new, old, *mode)


def test_modules_exercise_the_shapes(modules, sizediff, bloat_o_meter):
    """Real .ko files (modinfo, versions, .gnu.linkonce.this_module) whose diff adds, removes, grows
    functions (gcc's .constprop clones), data and read-only data."""
    old, new = modules
    for ko in modules:
        secs = subprocess.run(["readelf", "-SW", str(ko)], capture_output=True, text=True, check=True).stdout
        assert ".modinfo" in secs and ".gnu.linkonce.this_module" in secs and "REL (Relocatable file)" in \
            subprocess.run(["readelf", "-h", str(ko)], capture_output=True, text=True, check=True).stdout
    text = assert_same_as_oracle(sizediff, bloat_o_meter, old, new)
    names = {ln.split()[0] for ln in text.splitlines()[2:-1]}
    assert {"swkm_counts", "swkm_table"} <= names
    assert any(n.startswith("swkm_added") for n in names) and any(n.startswith("swkm_removed") for n in names)
    assert "__this_module" not in names and not any("modinfo" in n or "__UNIQUE_ID" in n for n in names)


def test_vmlinux_page_alloc_unit_against_pyelftools(images):
    """A linked image with DWARF5, only mm/page_alloc.c decoded: the stock 6.1 shape (the __rmqueue
    helpers inlined, steal_suitable_fallback out of line), placed at kernel addresses, and every
    inlined copy as pyelftools counts it in that unit (no relocations applied: the image is linked)."""
    from analyzer.inlines import analyze
    from inline_oracles import dwarf_inlines
    facts = analyze(images.vmlinux[0], cus=["mm/page_alloc.c"])
    assert facts.linked and facts.placed and len(facts.units) == 1 and facts.units[0].endswith("/mm/page_alloc.c")
    f = facts.functions
    want = {n: dict(c) for n, c in dwarf_inlines(images.vmlinux[0], "/mm/page_alloc.c").items()}
    assert {n: x.inlined_into for n, x in f.items() if x.inlined_count} == want
    for name in ("__rmqueue_smallest", "__rmqueue_fallback"):
        assert not f[name].out_of_line and f[name].inlined_count == sum(want[name].values()) > 0
    assert f["steal_suitable_fallback"].out_of_line
    gp = f["get_page_from_freelist"]
    assert gp.pieces[0].placement.offset >= 0xffffffff80000000
    assert gp.placement.lines >= -(-gp.pieces[0].size // 64)

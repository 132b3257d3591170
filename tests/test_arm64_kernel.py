"""arm64 kernels (issue 30): the example series' mm/page_alloc.o built by `sizewatch run --arch
arm64` from the allocator config's arm64 twin under Debian's cross gcc-12 and clang-19, checked
against the oracles: bloat-o-meter with the cross nm, `aarch64-linux-gnu-objdump -dr` for calls,
pyelftools for the inline counts, the built `.config` and compile command for -O2 and arm64."""
from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from analyzer.calls import call_graph
from analyzer.elf import load_images, read_symtab
from analyzer.inlines import analyze
from conftest import EXAMPLE_MBOX, sizewatch_cmd
from inline_oracles import dwarf_inlines, objdump_calls_a64
from toolchains.build import BuildOptions, build_commit
from toolchains.example import series_commits
from toolchains.kbuild import preset

pytestmark = pytest.mark.kernel
PA = "mm/page_alloc.o"
CROSS_NM_PREFIX = "aarch64-linux-gnu-"


@pytest.fixture(scope="module")
def objects():
    """(toolchain -> [base object, patch 1 object]) of the arm64 allocator config."""
    tree, shas = series_commits()
    cfg = preset("allocator", arch="arm64")
    out = {}
    for tc in ("gcc-12", "clang-19"):
        objs = []
        for sha in shas[:2]:
            b = build_commit(tree, sha, tc, [PA], cfg, BuildOptions(reports=False, jobs=2))
            assert b.status == "ok", (tc, b.errors)
            objs.append(b.targets[0].path)
        out[tc] = (objs, b.build_dir)
    return out


def test_arm64_config_and_compile_command(objects):
    for tc, (_, build_dir) in objects.items():
        config = (build_dir / ".config").read_text().splitlines()
        assert "CONFIG_ARM64=y" in config and "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y" in config, tc
        cmd = (build_dir / "mm" / ".page_alloc.o.cmd").read_text().splitlines()[0].split()
        assert "-O2" in cmd and "-Os" not in cmd, tc
        if tc == "gcc-12":
            assert cmd[2].endswith("aarch64-linux-gnu-gcc-12"), cmd[:4]
        else:
            assert "--target=aarch64-linux-gnu" in cmd, tc
    assert build_dir.name.startswith("clang-19-allocator-arm64-")


def test_table_is_bloat_o_meter_with_the_cross_nm(objects, sizediff, bloat_o_meter):
    for tc, ((base, head), _) in objects.items():
        ours = sizediff(base, head)
        theirs = bloat_o_meter("-p", CROSS_NM_PREFIX, base, head)
        assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
        assert ours.stdout == theirs.stdout and ours.stdout.count(b"\n") > 3, tc


def test_calls_and_inlines_against_objdump_and_pyelftools(objects):
    for tc, ((base, head), _) in objects.items():
        for obj in (base, head):
            facts = analyze(str(obj))
            assert facts.arch == "aarch64"
            img = load_images(obj)[0]
            ours = Counter((c.caller, c.target) for c in call_graph(img, read_symtab(img)).sites if c.kind == "call")
            assert ours == objdump_calls_a64(Path(obj)) and sum(ours.values()) > 100, tc
            inl = dwarf_inlines(Path(obj), "mm/page_alloc.c")
            by = facts.functions
            for name, callers in inl.items():
                if name in by:
                    assert by[name].inlined_count == sum(callers.values()), (tc, name)


def test_run_arch_arm64_reports_the_series(tmp_path):
    db = tmp_path / "s.db"
    p = subprocess.run([*sizewatch_cmd(), "run", "--db", str(db), "--arch", "arm64", "--series", str(EXAMPLE_MBOX),
                        "--toolchains", "gcc-12,clang-19", "--targets", PA, "--config", "allocator", "--json"],
                       capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stderr[-2000:]
    one = json.loads(p.stdout)["patches"][0]
    got = {t["toolchain"]: t for t in one["toolchains"]}
    assert set(got) == {"gcc-12", "clang-19"}
    assert got["gcc-12"]["toolchain_version"].startswith("aarch64-linux-gnu-gcc-12 ")
    for t in got.values():
        assert t["config"].startswith("allocator-arm64-") and t["tables"], t["toolchain"]
        names = {r["name"] for r in t["tables"][0]["rows"]}
        assert "__rmqueue_smallest" in names or "__rmqueue_fallback" in names, names
    bad = subprocess.run([*sizewatch_cmd(), "run", "--db", str(db), "--arch", "arm64", "--series", str(EXAMPLE_MBOX),
                          "--toolchains", "gcc-12", "--targets", "vmlinux", "--config", "allocator", "--measure"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 1 and bad.stderr.strip() == ("sizewatch: --measure boots x86_64 kernels "
                                                          "(qemu-system-x86_64): not arm64")


def test_arch_on_bisect_and_the_bot_policy():
    from analyzer.errors import InputError
    from ci.bot.policy import parse_policy
    p = parse_policy('[bot]\narch = "arm64"\nconfig = "allocator"\n')
    assert p.kbuild_config.arch == "arm64" and p.kbuild_config.key.startswith("allocator-arm64-")
    for text, line in (('[bot]\narch = "mips"\n', "[bot].arch: unknown arch 'mips' (known: x86_64, arm64)"),
                       ('[bot]\narch = "arm64"\nmeasure = true\ntargets = ["vmlinux"]\n',
                        "[bot].measure boots x86_64 kernels (qemu-system-x86_64): not arm64")):
        with pytest.raises(InputError) as e:
            parse_policy(text)
        assert str(e.value) == f"<config>: {line}"
    h = subprocess.run([*sizewatch_cmd(), "bisect", "--help"], capture_output=True, text=True)
    assert "--arch [x86_64|arm64]" in h.stdout

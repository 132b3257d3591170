"""The defconfig vmlinux per patch (issue 13): the configuration users ship, opt-in.

A first defconfig vmlinux is ~21-23 min per toolchain with -j2 on a 2-core machine, so this test
is not part of ``make test`` (tests/conftest.py deselects it unless ``-m`` names ``defconfig``); run it with
``pytest -m defconfig tests/test_vmlinux_defconfig.py``. After the first build each patch is
kbuild's incremental make in the persistent build dir (~50 s). ``bench/vmlinux_bench.py
--defconfig`` times it beside make by hand.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import EXAMPLE_MBOX, sizewatch_cmd

TOOLCHAIN = "gcc-12"
PA = "mm/page_alloc.o"


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.defconfig
@pytest.mark.timeout(7200)
def test_defconfig_vmlinux_per_patch(tmp_path, bloat_o_meter):
    from toolchains.build import BuildOptions, layout
    from toolchains.example import series_commits
    from toolchains.kbuild import preset
    db = tmp_path / "store.db"
    proc = subprocess.run([*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), "--targets", f"{PA},vmlinux",
                           "--config", "defconfig", "--toolchains", TOOLCHAIN, "--db", str(db), "--json"],
                          capture_output=True, text=True, timeout=7000)
    assert proc.returncode == 0 and "0 failed" in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    tree, shas = series_commits()
    kept = layout(tree, TOOLCHAIN, preset("defconfig"), BuildOptions()).objects
    for pos in (1, 2):
        (p,) = [p for p in report["patches"] if p["position"] == pos]
        parts = {t["target"]: t for t in p["toolchains"]}
        v, o = parts["vmlinux"], parts[PA]
        assert v["status"] == o["status"] == "ok" and v["config"].startswith("defconfig-")
        # every function of the object's table moves the same in vmlinux's
        rows = [{r["name"]: (r["old"], r["new"], r["delta"]) for r in t["tables"][0]["rows"]} for t in (o, v)]
        assert rows[0] and all(rows[1].get(n) == r for n, r in rows[0].items()), (pos, rows)
        # vmlinux's table is bloat-o-meter's on the two kept files
        ref = bloat_o_meter(kept / shas[pos - 1] / "vmlinux", kept / shas[pos] / "vmlinux")
        assert ref.returncode == 0 and v["bloat_text"] == ref.stdout.decode(), pos
        assert v["size"]["text"] > 10_000_000 and v["base_size"] is not None    # a whole defconfig kernel
    # patch 2 inlines the __rmqueue helpers patch 1 left out of line, and get_page_from_freelist grows
    (p2,) = [p for p in report["patches"] if p["position"] == 2]
    v2 = {r["name"]: r for r in [t for t in p2["toolchains"] if t["target"] == "vmlinux"][0]["tables"][0]["rows"]}
    assert v2["get_page_from_freelist"]["delta"] > 0
    assert any(n.startswith("__rmqueue") and r["new"] is None for n, r in v2.items())

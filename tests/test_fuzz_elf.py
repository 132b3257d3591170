"""Issue 12: a fixed-seed run of hostile ELF mutants through sizediff's and inspect's entry points.

200 mutants of small objects built by gcc-12 and clang-19 (tests/elf_mutants.py; long
campaigns: bench/fuzz.py). Each entry point runs in a forked child with a timeout and
must end in success or a SizewatchError, never another exception or a hang. Where
``nm --size-sort`` reads a mutant without complaint and sizediff reads it too, our
symbol list must be nm's.
"""
from __future__ import annotations

from pathlib import Path

import elf_mutants as em

SEED = 12
CASES = 200


def test_fuzz_elf_entry_points(tmp_path):
    work = tmp_path / "src"
    work.mkdir()
    objs = em.compile_samples(work)
    assert len(objs) >= 2, "gcc-12 and clang-19 build the samples (scripts/install.sh)"
    datas = [p.read_bytes() for p in objs]
    em.preload()
    bad: list[str] = []
    outcomes: dict[str, int] = {}
    compared = 0
    for case in range(CASES):
        where = tmp_path / f"case-{case}"
        where.mkdir()
        m = em.make(SEED, case, datas, where)
        base = objs[0]
        label = f"case {case} ({m.kind}: {m.detail})"
        runs = [em.run_forked("sizediff", em.entry_sizediff, base, m.path, timeout=10),
                em.run_forked("inspect", em.entry_inspect, m.path, timeout=10)]
        for r in runs:
            outcomes[f"{r.entry} {r.status}"] = outcomes.get(f"{r.entry} {r.status}", 0) + 1
            if r.status not in ("ok", "InputError"):
                bad.append(f"{r.entry} {label}: {r.status} {r.detail}")
            elif r.status == "InputError" and (not r.detail.strip() or "\n" in r.detail):
                bad.append(f"{r.entry} {label}: error is not one line: {r.detail!r}")
        if runs[0].status == "ok" and m.path.exists():
            _rc, nm_rows, _rss, _s = em.nm_listing(m.path)
            if nm_rows is not None and em.comparable(runs[0].listing):
                compared += 1
                if runs[0].listing != nm_rows:
                    bad.append(f"sizediff {label}: symbol list differs from nm --size-sort")
    assert not bad, "\n".join(bad[:20])
    # the mutants reach both outcomes and the oracle comparison is not vacuous
    assert outcomes.get("sizediff ok", 0) > 20 and outcomes.get("sizediff InputError", 0) > 20, outcomes
    assert outcomes.get("inspect ok", 0) > 20 and outcomes.get("inspect InputError", 0) > 20, outcomes
    assert compared > 20, compared

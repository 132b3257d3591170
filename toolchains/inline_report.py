"""The compilers' inline reports, collected in the object's own compile.

clang: ``-fsave-optimization-record -foptimization-record-passes=inline
-foptimization-record-file=F`` writes YAML remarks and leaves the object byte-identical.

gcc: ``-fopt-info-inline-all=F`` would do, but gcc records every code-generation option in
DW_AT_producer (``-grecord-gcc-switches`` is on by default), so the object's .debug_str
would then differ from kbuild's. The pass dumps ``-fdump-ipa-inline-optimized-missed=F``
and ``-fdump-tree-einline-optimized-missed=F`` are not recorded there: the object stays
byte-identical, and the dumps carry exactly the ``missed:``/``optimized:`` lines that
``-fopt-info-inline-all`` prints (checked on mm/page_alloc.c: the same 2,242 lines), among
the passes' other dump text. Those lines are kept, in -fopt-info's text format, which
analyzer.remarks reads.
"""
from __future__ import annotations

import re
from pathlib import Path

_OPTINFO = re.compile(r"^(?:\S[^:]*:\d+:\d+: |<unknown>: )?(?:missed|optimized):\s")


def flags(family: str, scratch: Path) -> list[str]:
    """Extra compiler flags that write the inline report into ``scratch`` (a directory)."""
    if family == "gcc":
        return [f"-fdump-tree-einline-optimized-missed={scratch}/einline",
                f"-fdump-ipa-inline-optimized-missed={scratch}/ipa-inline"]
    if family == "clang":
        return ["-fsave-optimization-record", "-foptimization-record-passes=inline",
                f"-foptimization-record-file={scratch}/remarks.yaml"]
    return []


def collect(family: str, scratch: Path, dest: Path) -> bool:
    """Write the report gathered in ``scratch`` to ``dest``; False when the compiler wrote none."""
    if family == "clang":
        src = scratch / "remarks.yaml"
        if not src.exists():
            return False
        src.replace(dest)
        return True
    if family == "gcc":
        parts = [scratch / "einline", scratch / "ipa-inline"]       # early inliner first, as -fopt-info
        if not any(p.exists() for p in parts):
            return False
        with dest.open("w") as out:
            for p in parts:
                if p.exists():
                    with p.open(errors="replace") as f:
                        out.writelines(line for line in f if _OPTINFO.match(line))
        return True
    return False

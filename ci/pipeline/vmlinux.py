"""The analysis of a linked kernel (a ``vmlinux`` target): what the pipeline reads from it.

A defconfig vmlinux is ~700 MB, 200+ MB of it DWARF: the per-function inline facts (with the
remarks joined, the likely paths, the findings) come from the allocator's own compilation unit only
(``mm/page_alloc.c``: the unit-name scan skips every other unit) and the file is mapped, never
read whole. Symbols and ``size`` totals come from ``ci.pipeline.objects`` like an object's.

The pipeline reads a built vmlinux in one place (``ci.pipeline.run._record``, under the reader
lock that keeps the retention pass away): this analysis, the hot functions at their link
addresses (``ci.pipeline.link_layout``) and the inline cost (``ci.pipeline.inline_costs``).
"""
from __future__ import annotations

from pathlib import Path

from ci.pipeline import analysis
from toolchains.mca import DEFAULT_MCPU

# the compilation units whose inline facts a vmlinux build stores, and the object they compile to
ALLOCATOR_CUS = ("mm/page_alloc.c",)
ALLOCATOR_OBJECT = "mm/page_alloc.o"


def unit_remarks(remarks: dict[str, list[Path]]) -> list[Path]:
    """The compiler's inline report for the units read inside vmlinux: the object target's, when the
    same build made it (same commit, toolchain and config: the object linked into this vmlinux
    is that compile's, so its reasons explain the vmlinux's inlining too)."""
    return remarks.get("vmlinux") or remarks.get(ALLOCATOR_OBJECT, [])


def analyze_vmlinux(path: Path, source_root: Path | None, remarks: list[Path], mcpu: str = DEFAULT_MCPU,
                    cus: tuple[str, ...] = ALLOCATOR_CUS) -> analysis.Analysis:
    """Inline facts, findings and hot functions' likely paths of a linked vmlinux, the DWARF read
    for ``cus`` only (a vmlinux without those units, or without DWARF, is a one-line InputError)."""
    res = analysis.analyze(path, source_root, remarks, mcpu, cus=cus)
    return res

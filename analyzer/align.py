"""Function placement against alignment and cache-line boundaries.

"These differences do add up though, until they eventually cross the alignment
boundary" (seed 000): a function's growth is invisible in ``size vmlinux`` until
its padded size steps to the next alignment block (16 bytes on x86-64; on arm64
what the compiler applied, see analyzer.func_align: gcc-12 16 bytes with at most
11 bytes of padding, clang-19 none beyond the 4-byte instructions) or it spans
one more 64-byte cache line. In a ``.o`` a function's offset is only meaningful
when it has a section of its own (-ffunction-sections) or the file is linked;
otherwise only the size-based figures are reported (taken from a unit-aligned start).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from analyzer.func_align import X86, FunctionAlign

FUNCTION_ALIGN = X86.unit
CACHE_LINE = 64


def _ceil(n: int, unit: int) -> int:
    return -(-n // unit)


@dataclass(frozen=True)
class Placement:
    size: int
    offset: int | None            # address (linked) or section offset (own section); None: unknown until link
    placed: bool                  # offset is meaningful
    align: int = FUNCTION_ALIGN   # the alignment unit (analyzer.func_align.FunctionAlign.unit)
    blocks: int = 0               # alignment units: size-based, or spanned from ``offset`` when placed
    lines: int = 0                # 64-byte cache lines: size-based (best case) or spanned when placed
    padded: int = 0               # size plus the padding before the next function starts
    headroom: int = 0             # bytes the function can grow before the next function moves
    line_headroom: int = 0        # bytes before it needs one more cache line
    max_skip: int = FUNCTION_ALIGN - 1   # most padding the compiler inserts (gcc arm64: 11 of 16)
    granule: int = 1              # start alignment kept anyway: 4 on arm64; align <= granule: no padding

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Placement":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def spanned(start: int, size: int, unit: int) -> int:
    """How many ``unit``-byte blocks [start, start+size) touches."""
    if size <= 0:
        return 0
    return (start + size - 1) // unit - start // unit + 1


def placement(size: int, offset: int | None = None, placed: bool = False,
              align: FunctionAlign | int = X86) -> Placement:
    """Blocks, lines and headroom of a function; ``align`` the file's function alignment (an int:
    that unit, always padded). Padding follows the compiler's rule: up to the unit when that takes
    at most ``max_skip`` bytes, else only to the granule (no padding on arm64)."""
    fa = align if isinstance(align, FunctionAlign) else FunctionAlign(max(align, 1), max(align, 1) - 1, 1, "given")
    unit = fa.unit
    start = offset if placed and offset is not None else 0
    end = start + size
    pad = fa.pad(end)
    blocks = spanned(start, size, unit)
    if placed and offset is not None:
        lines = spanned(offset, size, CACHE_LINE)
        line_headroom = _ceil(end, CACHE_LINE) * CACHE_LINE - end
    else:
        lines = _ceil(size, CACHE_LINE)
        line_headroom = lines * CACHE_LINE - size
    return Placement(size, offset if placed else None, placed, unit, blocks, lines, size + pad, pad, line_headroom,
                     fa.max_skip, fa.granule)


def crossed(base: Placement, head: Placement) -> list[str]:
    """Which boundaries the head crossed: 'alignment' (the next function moves: more padded
    bytes or more alignment units), 'cache_line' (more lines). Functions packed without padding
    (unit no larger than the granule: clang on arm64) have no alignment boundary to cross."""
    out = []
    if head.align > head.granule and (head.padded > base.padded or head.blocks > base.blocks):
        out.append("alignment")
    if head.lines > base.lines:
        out.append("cache_line")
    return out

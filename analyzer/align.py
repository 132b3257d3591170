"""Function placement against alignment and cache-line boundaries.

"These differences do add up though, until they eventually cross the alignment
boundary" (seed 000): a function's growth is invisible in ``size vmlinux`` until
its padded size steps to the next 16-byte block (x86-64 function alignment) or
it spans one more 64-byte cache line. In a ``.o`` a function's offset is only
meaningful when it has a section of its own (-ffunction-sections) or the file
is linked; otherwise only the size-based figures are reported.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

FUNCTION_ALIGN = 16
CACHE_LINE = 64


def _ceil(n: int, unit: int) -> int:
    return -(-n // unit)


@dataclass(frozen=True)
class Placement:
    size: int
    offset: int | None            # address (linked) or section offset (own section); None: unknown until link
    placed: bool                  # offset is meaningful
    align: int = FUNCTION_ALIGN
    blocks: int = 0               # 16-byte units: size-based, or spanned from ``offset`` when placed
    lines: int = 0                # 64-byte cache lines: size-based (best case) or spanned when placed
    padded: int = 0               # size rounded up to the function alignment
    headroom: int = 0             # bytes the function can grow before it needs one more 16-byte unit
    line_headroom: int = 0        # bytes before it needs one more cache line

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


def placement(size: int, offset: int | None = None, placed: bool = False, align: int = FUNCTION_ALIGN) -> Placement:
    align = max(align, 1)
    padded = _ceil(size, align) * align
    if placed and offset is not None:
        blocks = spanned(offset, size, align)
        lines = spanned(offset, size, CACHE_LINE)
        end = offset + size
        headroom = _ceil(end, align) * align - end
        line_headroom = _ceil(end, CACHE_LINE) * CACHE_LINE - end
    else:
        blocks = _ceil(size, align)
        lines = _ceil(size, CACHE_LINE)
        headroom = padded - size
        line_headroom = lines * CACHE_LINE - size
    return Placement(size, offset if placed else None, placed, align, blocks, lines, padded, headroom, line_headroom)


def crossed(base: Placement, head: Placement) -> list[str]:
    """Which boundaries the head crossed: 'alignment' (more 16-byte units), 'cache_line' (more lines)."""
    out = []
    if head.padded > base.padded or head.blocks > base.blocks:
        out.append("alignment")
    if head.lines > base.lines:
        out.append("cache_line")
    return out

"""Where a build's inlined code lands (analyzer.inline_cost, issue 14), as the rows the store keeps.

An object is read whole. A vmlinux is read whole too, kernel-wide attribution being the point, as
long as its ``.debug_info`` is at most ``WHOLE_KERNEL_LIMIT`` bytes. Measured (2 cores, load ~1.5):
a tinyconfig+DWARF5 allocator vmlinux (16.6 MB of ``.debug_info``, 453 units) costs 1.6 s and
166 MB peak RSS (33k store rows); Debian's 6.1 cloud vmlinux (163 MB, 2,172 units) 19 s and
1.03 GB (231k rows). A defconfig's 214 MB fits under the limit; anything bigger would cost the
pipeline minutes and gigabytes per build with today's decoder, so it is read restricted to the
allocator's units (``RESTRICTED_UNITS``) and the store and the report say so (``scope``). Directory targets (a thin archive of
objects) get none. Files without DWARF or symbols get none: the report says it is not stored.
"""
from __future__ import annotations

from pathlib import Path

from analyzer.elf import load_images
from analyzer.errors import InputError
from analyzer.inline_cost import inline_cost
from db.inline_cost import record_of
from db.models import InlineCostRecord
from toolchains.targets import parse

WHOLE_KERNEL_LIMIT = 256 << 20         # bytes of .debug_info a vmlinux is read whole up to
RESTRICTED_UNITS = ("mm/page_alloc.c",)


def _debug_info_size(path: Path) -> int:
    images = load_images(path)
    sec = images[0].section_by_name(".debug_info") if len(images) == 1 else None
    return sec.size if sec is not None else 0


def object_inline_cost(path: Path, target: str, whole_limit: int = WHOLE_KERNEL_LIMIT) -> InlineCostRecord | None:
    """The inline cost of the built ``target`` at ``path`` (None: not computed, see the module doc)."""
    kind = parse(target).kind
    if kind == "dir":
        return None
    cus: tuple[str, ...] = ()
    if kind == "vmlinux" and _debug_info_size(path) > whole_limit:
        cus = RESTRICTED_UNITS
    try:
        return record_of(target, inline_cost(path, cus or None), cus)
    except InputError:
        return None

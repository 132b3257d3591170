"""Where a build's inlined code lands (analyzer.inline_cost, issue 14), as the rows the store keeps.

An object is read whole. A vmlinux is read whole too, kernel-wide attribution being the point, as
long as its ``.debug_info`` is at most ``WHOLE_KERNEL_LIMIT`` bytes. Measured with libdw
(bench/inline_units_bench.py, 2 cores, load ~1): read whole, the allocator-config vmlinux (505
units) costs 0.6 s and 126 MB peak RSS, Debian's 6.1 cloud vmlinux (163 MB of ``.debug_info``,
2,172 units, 231k store rows) 4.0 s and 580 MB, a gcc-12 defconfig (214 MB, 2,683 units) 5.5 s
and 760 MB; per patch, with the unit cache, 0.2, 1.0 and 1.2 s. Past the limit a file is read
restricted to the allocator's units (``RESTRICTED_UNITS``) and the store and the report say so
(``scope``): its memory grows with the DWARF, and nothing bigger was measured. Directory
targets (a thin archive of objects) get none. Files without DWARF or symbols get none: the
report says it is not stored.

A vmlinux read whole goes unit by unit when the build left ``unit_keys`` (each unit's object hash,
:func:`ci.pipeline.unit_cache.object_keys`, taken right after the build): units whose object is
in the per-unit cache are not decoded again, the others are and are kept for the next build
(:mod:`analyzer.inline_units`; the result is the same as a whole decode).
"""
from __future__ import annotations

from pathlib import Path

from analyzer.elf import load_images
from analyzer.errors import InputError
from analyzer.inline_cost import inline_cost
from analyzer.inline_units import ByUnit, inline_cost_by_unit
from ci.pipeline.vmlinux import ALLOCATOR_CUS
from ci.pipeline.unit_cache import UnitCache
from db.inline_cost import record_of
from db.models import InlineCostRecord
from toolchains.targets import is_linked, parse

WHOLE_KERNEL_LIMIT = 256 << 20         # bytes of .debug_info a vmlinux is read whole up to
RESTRICTED_UNITS = ALLOCATOR_CUS     # past the limit: the allocator's units, as its facts


def _debug_info_size(path: Path) -> int:
    images = load_images(path)
    sec = images[0].section_by_name(".debug_info") if len(images) == 1 else None
    return sec.size if sec is not None else 0


def object_inline_cost(path: Path, target: str, whole_limit: int = WHOLE_KERNEL_LIMIT,
                       unit_keys: dict[str, str] | None = None,
                       cache: UnitCache | None = None) -> InlineCostRecord | None:
    """The inline cost of the built ``target`` at ``path`` (None: not computed, see the module doc);
    ``unit_keys``: unit name -> per-unit cache key of a vmlinux (see the module doc)."""
    kind = parse(target).kind
    if kind == "dir":
        return None
    cus: tuple[str, ...] = ()
    if is_linked(target) and _debug_info_size(path) > whole_limit:
        cus = RESTRICTED_UNITS
    try:
        if unit_keys and not cus:
            return record_of(target, cached_inline_cost(path, unit_keys, cache or UnitCache()).cost, cus)
        return record_of(target, inline_cost(path, cus or None), cus)
    except InputError:
        return None


def cached_inline_cost(path: Path, unit_keys: dict[str, str], cache: UnitCache) -> ByUnit:
    """A whole file's inline cost, decoding only the units ``cache`` lacks under ``unit_keys``;
    the units decoded are added to the cache (then trimmed to its size limit)."""
    r = inline_cost_by_unit(path, lambda _off, name, _length: cache.get(unit_keys[name]) if name in unit_keys else None)
    for off, uc in r.fresh.items():
        key = unit_keys.get(r.names.get(off) or "")
        if key is not None:
            try:
                cache.put(key, uc)
            except OSError:
                break                   # a full or read-only cache: the result stands without it
    if r.fresh:
        cache.prune()
    return r

"""Pausing Python's cyclic garbage collector while a bulk decode builds millions of objects.

A kernel's DWARF becomes millions of small tuples, lists and dataclasses, none of them in a
reference cycle. The generational collector still scans them again and again as they pile up
(each collection of the oldest generation walks every live container): measured on Debian's
6.1 cloud vmlinux, 1.3 s of a 4.8 s whole-kernel attribution, and 0.6 s of a 1.0 s merge of
2,172 cached units. Reference counting frees all of it as usual; only the cycle search waits.

The pause is process-wide (``gc.disable``), so it is counted: threads of one pipeline may pause
at once, and the collector runs again when the last of them leaves, never while one is inside.
If the collector was already off when the first entered, it stays off. Nothing else in sizewatch
switches the collector; code that did so during a pause would be overridden when it ends.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_inside = 0
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run the body with the cyclic collector off (see the module docstring)."""
    global _inside, _was_enabled
    counted = False
    try:
        with _lock:
            if _inside == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _inside += 1
            counted = True
        yield
    finally:
        if counted:
            with _lock:
                _inside -= 1
                if _inside == 0 and _was_enabled:
                    gc.enable()

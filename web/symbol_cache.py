"""Stored symbol sets kept between requests, by build id.

A build's symbols never change under its id (a rebuilt build is a new row with a new id), so the
patch pages of a series, which share their parents' builds, read each build's symbols once.
Bounded: the least recently used sets go first.
"""
from __future__ import annotations

import threading
from collections import OrderedDict


class SymbolCache(OrderedDict):
    """The ``cache`` mapping db.reports.commit_report takes (build id -> SymbolSet), LRU-bounded."""

    def __init__(self, size: int = 256):
        super().__init__()
        self.size = size
        self._lock = threading.Lock()

    def __getitem__(self, key):
        with self._lock:
            value = super().__getitem__(key)
            self.move_to_end(key)
            return value

    def __setitem__(self, key, value) -> None:
        with self._lock:
            super().__setitem__(key, value)
            self.move_to_end(key)
            while len(self) > self.size:
                self.popitem(last=False)

"""Compiler clone suffixes: which source function a symbol such as
``find_suitable_fallback.part.0`` or ``foo.constprop.0.isra.0`` came from.

gcc writes ``.part.N`` (partial inlining), ``.isra.N`` (IPA-SRA), ``.constprop.N``
(IPA-CP), ``.cold`` (hot/cold split), ``.lto_priv.N``/``.localalias``; clang writes
``.llvm.<hash>`` for promoted locals and ``.cold.N`` for split functions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

CLONE_KINDS = ("part", "isra", "constprop", "cold", "lto_priv", "localalias", "llvm", "specialized")
_SUFFIX = re.compile(r"\.(part|isra|constprop|cold|lto_priv|localalias|llvm|specialized)(\.[0-9A-Za-z_]+)?")
_NUMBER = re.compile(r"\.[0-9]+")


@dataclass(frozen=True)
class CloneName:
    symbol: str           # the full symbol name
    base: str             # the source function it came from
    kinds: tuple[str, ...]  # clone transformations in order, e.g. ("constprop", "isra")

    @property
    def is_clone(self) -> bool:
        return bool(self.kinds)

    @property
    def is_cold(self) -> bool:
        return "cold" in self.kinds


def parse(symbol: str) -> CloneName:
    """Split a symbol into its source function and clone suffixes."""
    m = _SUFFIX.search(symbol)
    if not m or m.start() == 0:
        return CloneName(symbol, symbol, ())
    base = symbol[:m.start()]
    kinds = tuple(k.group(1) for k in _SUFFIX.finditer(symbol, m.start()))
    return CloneName(symbol, base, kinds)


def strip_number(name: str) -> str:
    """bloat-o-meter's normalisation: drop every ``.NUMBER`` (static duplicates, clone counters)."""
    return _NUMBER.sub("", name) if "." in name else name

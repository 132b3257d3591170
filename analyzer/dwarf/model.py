"""What the DWARF readers return: subprograms and inlined instances, per compilation unit.

Both readers (the fast :mod:`analyzer.dwarf.walker` and the pyelftools
:mod:`analyzer.dwarf.reference`) fill these, so the tests compare them with ``==``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# how far abstract_origin/specification chains are followed: a chain longer than this is a
# reference loop in a damaged file, not something a compiler writes
MAX_ORIGIN_HOPS = 16


@dataclass
class Subprogram:
    """A DW_TAG_subprogram (abstract or concrete); ``origin`` points at the root declaration."""
    offset: int
    name: str | None = None
    linkage_name: str | None = None
    decl_file: str | None = None
    decl_line: int | None = None
    inline: int | None = None            # DW_AT_inline (1 inlined, 3 declared_inlined...)
    external: bool = False
    declaration: bool = False
    ranges: list[tuple[int, int]] = field(default_factory=list)
    origin: int | None = None            # DW_AT_abstract_origin / DW_AT_specification target


@dataclass
class InlinedInstance:
    """One DW_TAG_inlined_subroutine: whose code (``origin``) was copied into which function."""
    origin: int                          # DIE offset of the inlined function (before root resolution)
    container: int | None                # DIE offset of the enclosing concrete subprogram
    parent_origin: int | None            # the inlined function it sits in directly (nested inlining)
    ranges: list[tuple[int, int]]
    call_file: str | None = None
    call_line: int | None = None

    @property
    def size(self) -> int:
        return sum(hi - lo for lo, hi in self.ranges)


@dataclass
class CompileUnitFacts:
    name: str
    comp_dir: str | None
    producer: str | None
    subprograms: dict[int, Subprogram] = field(default_factory=dict)
    inlined: list[InlinedInstance] = field(default_factory=list)


@dataclass
class DwarfFacts:
    units: list[CompileUnitFacts]
    subprograms: dict[int, Subprogram]             # all units, by DIE offset

    def root(self, offset: int) -> Subprogram | None:
        """Follow abstract_origin/specification to the DIE holding name and declaration."""
        sp = self.subprograms.get(offset)
        seen = 0
        while sp is not None and sp.origin is not None and sp.origin in self.subprograms and seen < MAX_ORIGIN_HOPS:
            sp = self.subprograms[sp.origin]
            seen += 1
        return sp

    def name_of(self, offset: int) -> str | None:
        sp = self.subprograms.get(offset)
        seen = 0
        while sp is not None and seen < MAX_ORIGIN_HOPS:
            if sp.name:
                return sp.name
            sp = self.subprograms.get(sp.origin) if sp.origin is not None else None
            seen += 1
        return None

    def decl_of(self, offset: int) -> tuple[str | None, int | None]:
        sp = self.subprograms.get(offset)
        seen = 0
        while sp is not None and seen < MAX_ORIGIN_HOPS:
            if sp.decl_line is not None:
                return sp.decl_file, sp.decl_line
            sp = self.subprograms.get(sp.origin) if sp.origin is not None else None
            seen += 1
        return None, None

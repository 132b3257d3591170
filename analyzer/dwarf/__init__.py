"""DWARF: subprograms and inlined instances per compilation unit, for the inline facts.

- :mod:`.model`     the dataclasses both readers return
- :mod:`.encoding`  names (from pyelftools' tables), LEB128, forms, unit and abbreviation headers
- :mod:`.walker`    the fast reader (the DIE walk and the unit-name scan)
- :mod:`.lines`     the walker's file names from a unit's line table header
- :mod:`.ranges`    the walker's range lists (.debug_ranges, .debug_rnglists)
- :mod:`.reference` the pyelftools reader, the oracle the walker is tested against
- :mod:`.read`      ``read_dwarf``: relocated sections in, :class:`DwarfFacts` out
"""
from analyzer.dwarf.model import CompileUnitFacts, DwarfFacts, InlinedInstance, Subprogram
from analyzer.dwarf.read import cu_matches, has_dwarf, load_sections, read_dwarf
from analyzer.dwarf.walker import scan_unit_names

__all__ = ["CompileUnitFacts", "DwarfFacts", "InlinedInstance", "Subprogram", "cu_matches", "has_dwarf",
           "load_sections", "read_dwarf", "scan_unit_names"]

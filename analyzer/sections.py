"""Section totals, like binutils ``size`` (Berkeley text/data/bss) and ``size -A`` (every alloc section)."""
from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.elf import SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_NOBITS, ElfImage


@dataclass
class SectionSizes:
    text: int = 0
    data: int = 0
    bss: int = 0
    alloc: dict[str, int] = field(default_factory=dict)   # every SHF_ALLOC section, summed by name

    @property
    def dec(self) -> int:
        return self.text + self.data + self.bss


def section_sizes(images: list[ElfImage]) -> SectionSizes:
    """``size``'s Berkeley split: code and read-only data count as text, the rest as data or bss."""
    out = SectionSizes()
    for img in images:
        for s in img.sections:
            if not s.flags & SHF_ALLOC:
                continue
            out.alloc[s.name] = out.alloc.get(s.name, 0) + s.size
            if s.flags & SHF_EXECINSTR:
                out.text += s.size
            elif s.type != SHT_NOBITS:
                if s.flags & SHF_WRITE:
                    out.data += s.size
                else:
                    out.text += s.size
            else:
                out.bss += s.size
    return out


SIZE_HEADER = "   text\t   data\t    bss\t    dec\t    hex\tfilename"


def size_line(sizes: SectionSizes, filename: str) -> str:
    """One line of binutils ``size`` (Berkeley format) for ``sizes``, exactly as it prints it."""
    return (f"{sizes.text:7d}\t{sizes.data:7d}\t{sizes.bss:7d}\t{sizes.dec:7d}\t{sizes.dec:7x}\t"
            f"{filename}")

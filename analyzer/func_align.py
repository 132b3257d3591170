"""The function alignment a compiler actually applied, read from where the functions sit.

x86-64 compilers pad every function start to 16 bytes; arm64 ones do not: clang-19 aligns arm64
functions to 4 (the instruction size: no padding at all), gcc-12 emits ``.p2align 4,,11`` (16
bytes, but at most 11 bytes of padding: a function that would need 12 stays at 4). Kernel options
change it again (``-falign-functions=N``: CONFIG_FUNCTION_ALIGNMENT in 6.2+,
CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B in 6.1). So the unit is read from the file, not assumed:

- a function in a section of its own (-ffunction-sections): the section's ``sh_addralign`` (the
  linker pads input sections fully, whatever the compiler's skip limit);
- functions laid out one after the other (a ``.text`` of an object, a vmlinux): the padding
  between neighbours. A padded start is aligned to the unit; a start left unpadded where the unit
  needed padding bounds the skip limit.

``from_command`` reads ``-falign-functions`` from a compile command, ``from_asm`` the compiler's
own directives: what the tests hold the reading against.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

MAX_UNIT = 64            # largest function alignment a kernel asks for (DEBUG_FORCE_FUNCTION_ALIGN_64B)


@dataclass(frozen=True)
class FunctionAlign:
    unit: int = 16                # boundary function starts are padded to
    max_skip: int = 15            # most padding bytes inserted to reach it (unit - 1: always padded)
    granule: int = 1              # alignment every function start keeps anyway (4: arm64 instructions)
    source: str = "default"       # where the figures come from: default | section | addresses | command

    def pad(self, end: int) -> int:
        """Padding after a function ending at ``end`` (relative to a unit-aligned origin)."""
        need = -end % self.unit
        return need if need <= self.max_skip else -end % self.granule

    @property
    def padless(self) -> bool:
        """No padding to absorb growth: every byte a function grows moves what follows."""
        return self.unit <= self.granule

    def label(self) -> str:
        skip = f", at most {self.max_skip} bytes of padding" if self.max_skip < self.unit - 1 else ""
        return f"{self.unit}-byte function alignment{skip} (from {self.source})"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "FunctionAlign":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d}) if d else cls()


X86 = FunctionAlign()


def granule_of(arch: str) -> int:
    """Instruction alignment: arm64 instructions are 4 bytes; x86 ones start anywhere."""
    return 4 if arch == "aarch64" else 1


def _lowbit(n: int) -> int:
    return n & -n if n else 1 << 30


def from_section(addralign: int, granule: int) -> FunctionAlign:
    """A function alone in its section: the linker aligns the section to its sh_addralign."""
    unit = max(addralign, granule, 1)
    return FunctionAlign(unit, unit - 1, granule, "section")


def infer(spans: list[tuple[int, int]], granule: int, section_align: int | None = None) -> FunctionAlign | None:
    """The alignment that explains the padding between consecutive functions ``spans`` ((start,
    end) pairs of one section, any order); None when nothing can be read (fewer than two functions
    and no section alignment). ``section_align``: the section's sh_addralign, the largest unit
    possible (a relocatable object's .text).

    By majority, not by every pair: in a vmlinux the functions gcc moved to .text.unlikely (aligned
    to the granule only) sit among the others in one output section. The unit is the most common
    alignment of padded starts; the skip limit is one below the smallest padding need that is
    mostly left unpadded."""
    spans = sorted(set(spans))
    pairs = [(a_end, b_start) for (_, a_end), (b_start, _) in zip(spans, spans[1:]) if 0 <= b_start - a_end < MAX_UNIT]
    cap = min(section_align or MAX_UNIT, MAX_UNIT)
    g = max(granule, 1)
    lows = Counter(max(min(_lowbit(b), cap), g) for e, b in pairs if b > e)
    if not lows:
        if section_align is None or not pairs:
            return None if section_align is None else from_section(section_align, granule)
        return FunctionAlign(g, g - 1, granule, "addresses")
    unit = max(lows.items(), key=lambda kv: (kv[1], -kv[0]))[0]
    taken: Counter = Counter()
    left: Counter = Counter()
    for e, b in pairs:
        need = -e % unit
        if need > -e % g and b - e < unit:
            (taken if b - e == need else left)[need] += 1
    max_skip = next((need - 1 for need in sorted(left) if left[need] > taken[need]), unit - 1)
    return FunctionAlign(unit, max_skip, granule, "addresses")


_FLAG = re.compile(r"^-f(no-)?align-functions(?:=(.*))?$")


def from_command(argv: list[str], granule: int) -> FunctionAlign | None:
    """``-falign-functions[=N[:M[:N2[:M2]]]]`` of a compile command (the last one counts); None when
    the command does not say (the compiler's default applies). N aligns with at most M-1 bytes of
    padding, N2 (skip M2-1) is the fallback when that is too much (gcc's documented syntax)."""
    got: FunctionAlign | None = None
    for arg in argv:
        m = _FLAG.match(arg)
        if not m:
            continue
        if m.group(1) or m.group(2) in ("0", "1"):
            got = FunctionAlign(max(granule, 1), max(granule, 1) - 1, granule, "command")
            continue
        if m.group(2) is None:
            got = None                       # -falign-functions alone: the machine default
            continue
        nums = [int(x) if x else 0 for x in m.group(2).split(":")]
        n = nums[0]
        skip = (nums[1] if len(nums) > 1 and nums[1] else n) - 1
        n2 = nums[2] if len(nums) > 2 and nums[2] else granule
        got = FunctionAlign(max(n, granule), min(skip, n - 1), max(n2, granule), "command")
    return got


_P2 = re.compile(r"^\s*\.p2align\s+(\d+)(?:\s*,\s*[^,]*)?(?:\s*,\s*(\d+))?\s*$")
_ALIGN = re.compile(r"^\s*\.align\s+(\d+)\s*$")
_LABEL = re.compile(r"^([A-Za-z_.$][\w.$]*):")


def from_asm(text: str, arch: str) -> dict[str, FunctionAlign]:
    """Per function of a compiler's ``-S`` output: the alignment directives right before its label
    (``.type f, %function`` names the functions). ``.p2align P[,fill[,max]]`` and, on arm64,
    ``.align P`` (a power of two there)."""
    funcs = set(re.findall(r"\.type\s+([\w.$]+)\s*,\s*[@%]function", text))
    granule = granule_of(arch)
    out: dict[str, FunctionAlign] = {}
    pending: list[tuple[int, int]] = []
    for line in text.splitlines():
        m = _P2.match(line) or (_ALIGN.match(line) if arch == "aarch64" else None)
        if m:
            unit = 1 << int(m.group(1))
            skip = int(m.group(2)) if m.re is _P2 and m.group(2) is not None else unit - 1
            pending.append((unit, min(skip, unit - 1)))
            continue
        lab = _LABEL.match(line)
        if line.lstrip().startswith((".section", ".text", ".data", ".bss", ".previous", ".pushsection",
                                     ".popsection")):
            pending = []                     # a constant pool's alignment is not the next function's
        elif lab and lab.group(1) not in funcs:
            pending = []
        elif lab:
            unit, skip = max(pending) if pending else (granule, granule - 1)
            full = [u for u, s in pending if s == u - 1 and u < unit] or [granule]
            out[lab.group(1)] = FunctionAlign(max(unit, granule), skip, max(max(full), granule), "asm")
            pending = []
        elif line.strip() and not line.lstrip().startswith((".", "#", "//", "@")):
            pending = []
    return out

"""Which way each conditional branch of a vmlinux went in a measured window: the executed-path
oracle for the static likely paths (analyzer.likely_path).

The runtime plugin (toolchains/runtime/plugin.c) counts how often every instruction executed in
the window, not edges. A branch's two edges are still exact when one of its successors can be
entered only through that edge: ``objdump -d`` of the whole vmlinux gives every direct jump and
call target and every fall-through, and C code has no other way into the middle of a function
but a jump table (the allocator config has CONFIG_RETPOLINE: gcc gets ``-fno-jump-tables``, clang
emits none in retpoline mode; ``Listing.indirect_jumps`` lists any, and the test asserts there are
none). Interrupts return to the instruction they interrupted, which then runs once. For a
``jcc`` at A executed n times, with fall-through F and target T:

- every other way into F (a jump or call to F from elsewhere) never executed in the window:
  not taken = count(F), taken = n - count(F);
- else every other way into T (other jumps to it, the instruction before it falling through)
  never executed: taken = count(T), not taken = n - count(T);
- else the counts cannot split the edges: no verdict.

Nothing here reads sizewatch's own disassembly (capstone) or its likely paths: only objdump's text
and the plugin's counts.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# ``objdump -d -w --no-show-raw-insn`` lines: a function's header; an instruction (address,
# mnemonic with prefixes skipped, a direct jump's or call's printed target); a direct branch alone
_FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$", re.M)
_PREFIX = r"(?:(?:notrack|bnd|cs|ds|lock|rep|repz|repnz) )*"
_LINE = re.compile(r"^ *([0-9a-f]+):\t" + _PREFIX + r"(\S+)(?:[ \t]+(?:([0-9a-f]+) <|(\*)))?", re.M)
_BRANCH = re.compile(r"^ *([0-9a-f]+):\t" + _PREFIX + r"(?:j[a-z]+|call|loop[a-z]*)[ \t]+([0-9a-f]+) <", re.M)
_NO_FALL = ("jmp", "ret", "ud2", "int3", "hlt", "iret", "sysret")


class Listing:
    """``objdump -d`` of a linked file: every direct jump or call to each address in the whole
    file, and, inside the named functions (and their ``.cold``/clone parts), every instruction's
    mnemonic and successor."""

    def __init__(self, path: Path, functions: set[str]):
        out = subprocess.run(["objdump", "-d", "-w", "--no-show-raw-insn", str(path)],
                             capture_output=True, text=True, check=True).stdout
        self.mnemonic: dict[int, str] = {}
        self.target: dict[int, int] = {}         # a direct jump's or call's target
        self.next: dict[int, int] = {}           # address -> the next instruction's address
        self.sources: dict[int, list[int]] = {}  # address -> the direct jumps/calls to it
        self.fall_from: dict[int, int] = {}      # address -> the previous instruction, which falls into it
        self.indirect_jumps: list[int] = []      # jmp *... in the named functions (a jump table's way in)
        for a, t in _BRANCH.findall(out):
            self.sources.setdefault(int(t, 16), []).append(int(a, 16))
        heads = list(_FUNC.finditer(out))
        for k, head in enumerate(heads):
            if head.group(2).split(".")[0] not in functions:
                continue
            body = out[head.end():heads[k + 1].start() if k + 1 < len(heads) else len(out)]
            prev, prev_mnem = None, ""
            for a, mnem, t, star in _LINE.findall(body):
                addr = int(a, 16)
                self.mnemonic[addr] = mnem
                if star and mnem.startswith("jmp"):
                    self.indirect_jumps.append(addr)
                if t and mnem.startswith(("j", "call", "loop")):
                    self.target[addr] = int(t, 16)
                if prev is not None:
                    self.next[prev] = addr
                    if not prev_mnem.startswith(_NO_FALL):
                        self.fall_from[addr] = prev
                prev, prev_mnem = addr, mnem

    def is_jcc(self, address: int) -> bool:
        mnem = self.mnemonic.get(address, "")
        return address in self.target and mnem.startswith("j") and not mnem.startswith("jmp")


@dataclass(frozen=True)
class Edges:
    """One conditional branch's edges in the window (``None``: the counts cannot split them)."""
    executed: int
    taken: int | None
    fall: int | None

    @property
    def hot(self) -> str | None:
        """``taken`` or ``fall``: the side taken more often; None when not executed, tied or unknown."""
        if not self.executed or self.taken is None or self.taken == self.fall:
            return None
        return "taken" if self.taken > self.fall else "fall"


def edges(listing: Listing, counts: dict[int, tuple[int, int]], address: int) -> Edges:
    """The edges of the ``jcc`` at ``address`` from the window's per-instruction ``counts``."""
    count = lambda a: counts.get(a, (0, 0))[0]
    n = count(address)
    fall, target = listing.next[address], listing.target[address]
    into_fall = listing.sources.get(fall, [])
    into_target = [a for a in listing.sources.get(target, []) if a != address]
    if target in listing.fall_from:
        into_target.append(listing.fall_from[target])
    known_target = target in listing.mnemonic            # else its fall-through is not in the listing
    by_fall = by_target = None
    if target != fall and not any(count(a) for a in into_fall):        # only A's fall-through ran into F
        by_fall = Edges(n, n - count(fall), count(fall))
    if target != fall and known_target and not any(count(a) for a in into_target):   # only A's jump ran into T
        by_target = Edges(n, count(target), n - count(target))
    if by_fall and by_target:
        # both successors entered only through A: the counts must add up, or the premise is wrong
        assert by_fall == by_target, (hex(address), by_fall, by_target)
    got = by_fall or by_target or Edges(n, None, None)
    # a successor that ran more often than A would have another way in: the premise is wrong
    assert got.taken is None or (got.taken >= 0 and got.fall >= 0), (hex(address), got)
    return got

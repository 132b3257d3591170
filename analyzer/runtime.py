"""Executed instructions of the allocator's fast path, counted under emulation (issue 26).

A guest kernel runs N ``alloc_pages`` + ``__free_pages`` pairs per order between two marker
instructions; a QEMU TCG plugin counts every executed guest instruction by address inside that
window (``toolchains.runtime``). This module is the pure half: it turns the plugin's per-address
counts, the vmlinux's function symbols, the measured unit's code ranges (DWARF) and the static
likely paths into per-order and per-function figures, and back from and into plain dicts for the
store and the reports.

Why per address and not the window's total: timer interrupts land in the window at moments that
depend on the host's speed, so the window's total varies by a fraction of a percent between runs;
the instructions inside the allocator's own functions do not. Every figure that is compared
(``per_pair``, the unit's functions) is counted inside the measured unit's code only.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable

from analyzer.errors import InputError

LINE = 64
UNIT = "mm/page_alloc.c"

# the plugin's output (``toolchains/runtime/plugin.c``): text, one record per line
#   W <order>                  a window begins (the marker executed before the loop)
#   I <hex address> <count> <size>   an instruction executed <count> times in the window
#   E <order>                  the window ended
MAX_RECORDS = 4_000_000          # a window touching more distinct instructions is not our benchmark


@dataclass(frozen=True)
class Window:
    """One order's loop: executed count and size per instruction address."""
    order: int
    pairs: int
    counts: dict[int, tuple[int, int]]          # address -> (times executed, instruction size)

    @property
    def total(self) -> int:
        return sum(c for c, _ in self.counts.values())


def parse_counts(data: bytes, pairs: int) -> list[Window]:
    """The plugin's records, checked: a window that never ended (the guest died in it) is dropped,
    anything malformed is an ``InputError`` naming the line. ``pairs``: the loop's length."""
    out: list[Window] = []
    cur: dict[int, tuple[int, int]] | None = None
    order = 0
    n = 0
    for lineno, raw in enumerate(data.splitlines(), 1):
        parts = raw.split()
        if not parts:
            continue
        n += 1
        if n > MAX_RECORDS:
            raise InputError(f"instruction counts: more than {MAX_RECORDS} records")
        try:
            if parts[0] == b"W" and len(parts) == 2:
                order = int(parts[1])
                cur = {}
            elif parts[0] == b"I" and len(parts) == 4 and cur is not None:
                addr, count, size = int(parts[1], 16), int(parts[2]), int(parts[3])
                if count < 0 or not 0 < size <= 15:
                    raise ValueError
                cur[addr] = (count, size)
            elif parts[0] == b"E" and len(parts) == 2 and cur is not None and int(parts[1]) == order:
                out.append(Window(order, pairs, cur))
                cur = None
            else:
                raise ValueError
        except ValueError:
            raise InputError(f"instruction counts: line {lineno} is not a record: {raw[:60]!r}") from None
    return out


@dataclass(frozen=True)
class Function:
    """A function symbol of the measured vmlinux."""
    name: str
    address: int
    size: int
    unit: bool = False            # its code belongs to the measured unit (mm/page_alloc.c)


def vmlinux_functions(path: str, unit: str = UNIT) -> list[Function]:
    """The function symbols of a linked image, each marked when its code belongs to ``unit``
    (its entry lies in a range of one of the unit's DWARF subprograms)."""
    from analyzer.dwarf.read import read_dwarf
    from analyzer.elf import function_symbols
    from analyzer.inline_cost import open_with_dwarf
    img, table = open_with_dwarf(path)         # one ELF file with symbols and DWARF, else one line
    idx = function_symbols(img, table)
    names = table.names(idx)
    addrs = table.entries["value"][idx].tolist()
    sizes = table.entries["size"][idx].tolist()
    facts = read_dwarf(img, table, (unit,), engine="auto")
    ranges = sorted(r for u in facts.units for sp in u.subprograms.values() for r in sp.ranges)
    if not ranges:
        raise InputError(f"{path}: no code of {unit} in its DWARF (built without debug info?)")
    starts = [lo for lo, _ in ranges]

    def in_unit(a: int) -> bool:
        i = bisect.bisect_right(starts, a) - 1
        return i >= 0 and ranges[i][0] <= a < ranges[i][1]
    return [Function(n, a, z, in_unit(a)) for n, a, z in zip(names, addrs, sizes)]


def has_pvh_entry(path: str) -> bool:
    """Whether a vmlinux carries the PVH entry note (Xen's PHYS32_ENTRY, CONFIG_PVH): what lets
    QEMU boot the ELF file itself."""
    from elftools.elf.elffile import ELFFile
    from elftools.common.exceptions import ELFError
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for seg in elf.iter_segments():
                if seg["p_type"] != "PT_NOTE":
                    continue
                for note in seg.iter_notes():
                    if note["n_name"] == "Xen" and note["n_type"] in (18, "XEN_ELFNOTE_PHYS32_ENTRY"):
                        return True
    except (ELFError, OSError, ValueError, KeyError) as e:
        raise InputError(f"{path}: cannot read its ELF notes ({e})") from None
    return False


class FunctionIndex:
    """Function symbols by address, for placing an executed instruction (sorted, non-overlapping
    first: where symbols overlap (aliases) the first by address and name wins)."""

    def __init__(self, functions: Iterable[Function]):
        fs = sorted((f for f in functions if f.size > 0), key=lambda f: (f.address, f.name))
        self.functions: list[Function] = []
        end = -1
        for f in fs:
            if f.address >= end:
                self.functions.append(f)
                end = f.address + f.size
        self.starts = [f.address for f in self.functions]

    def at(self, addr: int) -> Function | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0:
            f = self.functions[i]
            if addr < f.address + f.size:
                return f
        return None


@dataclass
class FunctionRun:
    """One function's share of one order's loop, per alloc/free pair."""
    name: str
    address: int
    unit: bool
    instructions: float           # executed instructions per pair
    calls: float                  # entries (its first instruction executed) per pair
    lines: int                    # 64-byte lines holding an instruction executed at least once per pair
    total: int                    # executed instructions in the whole window (exact)

    def to_dict(self) -> dict:
        return {"address": self.address, "unit": self.unit, "instructions": self.instructions,
                "calls": self.calls, "lines": self.lines, "total": self.total}

    @classmethod
    def from_dict(cls, name: str, d: dict) -> "FunctionRun":
        return cls(name, int(d["address"]), bool(d["unit"]), float(d["instructions"]), float(d["calls"]),
                   int(d["lines"]), int(d["total"]))


@dataclass
class PathCheck:
    """A hot function's executed path per call beside its static likely path (``analyzer.likely_path``):
    the instructions executed on every call, and where the two differ."""
    function: str
    calls: float                  # per pair
    executed: int                 # instructions executed on every call (count >= calls)
    likely: int                   # instructions on the static likely path
    off_likely: list[int] = field(default_factory=list)      # executed on every call, not on the likely path
    not_executed: list[int] = field(default_factory=list)    # on the likely path, not executed on every call

    @property
    def agree(self) -> bool:
        return not self.off_likely and not self.not_executed

    def to_dict(self) -> dict:
        return {"function": self.function, "calls": self.calls, "executed": self.executed,
                "likely": self.likely, "agree": self.agree, "off_likely": self.off_likely,
                "not_executed": self.not_executed}

    @classmethod
    def from_dict(cls, d: dict) -> "PathCheck":
        return cls(str(d["function"]), float(d["calls"]), int(d["executed"]), int(d["likely"]),
                   [int(a) for a in d.get("off_likely", [])], [int(a) for a in d.get("not_executed", [])])


@dataclass
class OrderRun:
    """One order's loop: N pairs of ``alloc_pages(GFP_KERNEL, order)`` + ``__free_pages``."""
    order: int
    pairs: int
    instructions: float           # per pair, inside the measured unit's functions
    lines: int                    # the unit's 64-byte lines executed at least once per pair
    unit_total: int               # the unit's executed instructions in the window (exact, compared for determinism)
    window_total: int             # everything executed in the window (timer interrupts included: varies)
    functions: dict[str, FunctionRun] = field(default_factory=dict)
    paths: list[PathCheck] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"order": self.order, "pairs": self.pairs,
                "per_pair": {"instructions": self.instructions, "lines": self.lines},
                "unit_total": self.unit_total, "window_total": self.window_total,
                "functions": {n: f.to_dict() for n, f in self.functions.items()},
                "paths": [p.to_dict() for p in self.paths]}

    @classmethod
    def from_dict(cls, d: dict) -> "OrderRun":
        pp = d["per_pair"]
        return cls(int(d["order"]), int(d["pairs"]), float(pp["instructions"]), int(pp["lines"]),
                   int(d["unit_total"]), int(d["window_total"]),
                   {str(n): FunctionRun.from_dict(str(n), f) for n, f in d.get("functions", {}).items()},
                   [PathCheck.from_dict(p) for p in d.get("paths", [])])


@dataclass
class Runtime:
    """A vmlinux measured under emulation: ``ok`` with one ``OrderRun`` per order, or ``failed``
    with the one line that says why (the guest did not boot, panicked, hung, printed no result)."""
    status: str                   # ok | failed
    message: str = ""
    unit: str = UNIT
    pairs: int = 0
    orders: list[OrderRun] = field(default_factory=list)
    emulator: str = ""            # e.g. "qemu-system-x86_64 7.2.22 (TCG, 1 vCPU)"
    seconds: float = 0.0          # host wall time of the boot and measurement
    console: str = ""             # the guest console's last lines (for a failure)

    def order(self, k: int) -> OrderRun | None:
        return next((o for o in self.orders if o.order == k), None)

    def to_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "unit": self.unit, "pairs": self.pairs,
                "emulator": self.emulator, "seconds": self.seconds, "console": self.console,
                "orders": {str(o.order): o.to_dict() for o in self.orders}}

    @classmethod
    def from_dict(cls, d: dict) -> "Runtime":
        if not isinstance(d, dict) or d.get("status") not in ("ok", "failed"):
            raise InputError("runtime result: not a measurement")
        try:
            orders = sorted((OrderRun.from_dict(o) for o in d.get("orders", {}).values()), key=lambda o: o.order)
            return cls(str(d["status"]), str(d.get("message", "")), str(d.get("unit", UNIT)), int(d.get("pairs", 0)),
                       orders, str(d.get("emulator", "")), float(d.get("seconds", 0.0)), str(d.get("console", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"runtime result: damaged ({type(e).__name__})") from None


def _per(x: int, pairs: int) -> float:
    return round(x / pairs, 2) if pairs else 0.0


def _lines(addrs: Iterable[tuple[int, int]]) -> int:
    out: set[int] = set()
    for a, size in addrs:
        out.update(range(a // LINE, (a + size - 1) // LINE + 1))
    return len(out)


def order_run(w: Window, index: FunctionIndex, likely: dict[str, tuple[int, set[int]]] | None = None,
              min_share: float = 0.5) -> OrderRun:
    """One window's figures. A function outside the unit is listed when it runs at least
    ``min_share`` instructions per pair (so interrupt handlers, a few instructions per thousand
    pairs, stay out); the unit's functions are listed whenever they ran.
    ``likely``: function -> (entry address, addresses on its static likely path)."""
    pairs = max(w.pairs, 1)
    per_fn: dict[Function, list[tuple[int, int, int]]] = {}
    for addr, (count, size) in w.counts.items():
        f = index.at(addr)
        if f is not None and count:
            per_fn.setdefault(f, []).append((addr, count, size))
    unit_total = 0
    unit_lines: list[tuple[int, int]] = []
    functions: dict[str, FunctionRun] = {}
    for f, insns in per_fn.items():
        total = sum(c for _, c, _ in insns)
        every = [(a, s) for a, c, s in insns if c >= pairs]
        if f.unit:
            unit_total += total
            unit_lines += every
        if f.unit or total >= min_share * pairs:
            entry = w.counts.get(f.address, (0, 0))[0]
            functions[f.name] = FunctionRun(f.name, f.address, f.unit, _per(total, pairs), _per(entry, pairs),
                                            _lines(every), total)
    paths = []
    for name, (entry, on_path) in sorted((likely or {}).items()):
        calls = w.counts.get(entry, (0, 0))[0]
        fr = functions.get(name)
        if not calls or fr is None or calls < pairs:
            continue                             # not called on every pair: no per-call path to compare
        f = index.at(entry)
        executed = {a for a, c, _ in per_fn.get(f, []) if c >= calls} if f else set()
        paths.append(PathCheck(name, _per(calls, pairs), len(executed), len(on_path),
                               sorted(executed - on_path), sorted(on_path - executed)))
    functions = dict(sorted(functions.items(), key=lambda kv: (-kv[1].total, kv[0])))
    return OrderRun(w.order, w.pairs, _per(unit_total, pairs), _lines(unit_lines), unit_total, w.total,
                    functions, paths)

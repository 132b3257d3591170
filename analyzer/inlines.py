"""Per-function inline facts of one object: symbols + DWARF + disassembly + source + remarks.

``analyze(path)`` is the entry point; it returns plain dataclasses with
``to_dict``/``from_dict`` so the store, the web view and the mail bot keep and
show them without the analyzer.
"""
from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from analyzer import declared as decl
from analyzer.align import Placement, placement
from analyzer.calls import EM_AARCH64, EM_X86_64, CallGraph, address_references, call_graph
from analyzer.clones import parse as parse_clone
from analyzer.func_align import X86, FunctionAlign, from_section, granule_of, infer
from analyzer.dwarf import DwarfFacts, has_dwarf, read_dwarf
from analyzer.elf import STB_GLOBAL, STB_LOCAL, STB_WEAK, function_symbols, load_images, read_symtab
from analyzer.errors import InputError
from analyzer.relocs import symbol_addresses
from analyzer.remarks import MISSED, Remark, read_remarks, reasons_for

BINDINGS = {STB_LOCAL: "local", STB_GLOBAL: "global", STB_WEAK: "weak"}


@dataclass
class Piece:
    """One out-of-line symbol of a function: itself, or a clone (``.constprop.0``, ``.cold``...)."""
    symbol: str
    size: int
    section: str
    offset: int
    binding: str
    clones: list[str] = field(default_factory=list)     # clone kinds, e.g. ["constprop", "isra"]
    placement: Placement | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["placement"] = self.placement.to_dict() if self.placement else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Piece":
        d = dict(d)
        p = d.pop("placement", None)
        return cls(**d, placement=Placement.from_dict(p) if p else None)


@dataclass
class FunctionFacts:
    name: str                                   # the source function
    size: int = 0                               # bytes of all its out-of-line pieces
    section: str = ""                           # of the main piece
    offset: int = 0
    binding: str = ""
    pieces: list[Piece] = field(default_factory=list)
    declared: str = decl.UNKNOWN                # always_inline | inline | noinline | plain | unknown
    decl_file: str | None = None
    decl_line: int | None = None
    dw_inline: int | None = None                # DW_AT_inline as the compiler wrote it
    inlined_count: int = 0
    inlined_into: dict[str, int] = field(default_factory=dict)
    inlined_bytes: int = 0
    out_of_line: bool = False
    callers: dict[str, int] = field(default_factory=dict)     # out-of-line call sites, by calling symbol
    address_taken: int = 0                                    # references to its start outside calls (.o only)
    decisions: list[dict] = field(default_factory=list)       # the compilers' remarks with this callee
    reasons: list[str] = field(default_factory=list)          # distinct "not inlined" reasons
    placement: Placement | None = None                        # of the main piece

    @property
    def clone_symbols(self) -> list[str]:
        return [p.symbol for p in self.pieces if p.clones]

    @property
    def call_count(self) -> int:
        return sum(self.callers.values())

    def to_dict(self) -> dict:
        # field by field in declaration order (what asdict gives), without asdict's deep recursion:
        # ~0.1 s of a page_alloc.o's JSON
        d = {}
        for name in _FACT_FIELDS:
            v = getattr(self, name)
            d[name] = dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
        d["pieces"] = [p.to_dict() for p in self.pieces]
        d["decisions"] = [dict(x) for x in self.decisions]
        d["placement"] = self.placement.to_dict() if self.placement else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "FunctionFacts":
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        d["pieces"] = [Piece.from_dict(p) for p in d.get("pieces", [])]
        p = d.get("placement")
        d["placement"] = Placement.from_dict(p) if p else None
        return cls(**d)


_FACT_FIELDS = tuple(f.name for f in fields(FunctionFacts))


@dataclass
class ObjectFacts:
    path: str
    arch: str = ""
    linked: bool = False
    producer: str | None = None
    units: list[str] = field(default_factory=list)
    has_dwarf: bool = False
    placed: bool = False              # offsets are meaningful (linked, or one function per section)
    align: FunctionAlign = X86        # the function alignment read from the file (analyzer.func_align)
    functions: dict[str, FunctionFacts] = field(default_factory=dict)
    remarks: list[Remark] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def get(self, name: str) -> FunctionFacts | None:
        return self.functions.get(name)

    def to_dict(self) -> dict:
        return {"path": self.path, "arch": self.arch, "linked": self.linked, "producer": self.producer,
                "units": self.units, "has_dwarf": self.has_dwarf, "placed": self.placed,
                "align": self.align.to_dict(), "functions": {k: v.to_dict() for k, v in self.functions.items()},
                "remarks": [r.to_dict() for r in self.remarks], "notes": self.notes}

    @classmethod
    def from_dict(cls, d: dict) -> "ObjectFacts":
        return cls(d["path"], d.get("arch", ""), d.get("linked", False), d.get("producer"), d.get("units", []),
                   d.get("has_dwarf", False), d.get("placed", False), FunctionAlign.from_dict(d.get("align")),
                   {k: FunctionFacts.from_dict(v) for k, v in d.get("functions", {}).items()},
                   [Remark.from_dict(r) for r in d.get("remarks", [])], d.get("notes", []))




ENTRY_SLACK = 16     # bytes a compiler puts before DW_AT_low_pc: patchable-entry NOPs (arm64 ftrace: 8)


def _entry_shifted(by_addr: dict[int, str], sizes: dict[int, int], starts: list[int]) -> dict[int, str]:
    """``by_addr`` plus, for each DWARF start that is no symbol's address, the symbol it lies just
    inside of (at most ENTRY_SLACK bytes in): gcc starts a function's DWARF range after the NOPs of
    -fpatchable-function-entry, which sit at the symbol."""
    out = dict(by_addr)
    addrs = sorted(by_addr)
    for lo in starts:
        if lo in out:
            continue
        i = bisect.bisect_right(addrs, lo) - 1
        if i >= 0 and 0 < lo - addrs[i] <= ENTRY_SLACK and lo < addrs[i] + sizes.get(addrs[i], 0):
            out[lo] = by_addr[addrs[i]]
    return out


def file_alignment(img, table, fsyms: np.ndarray, symaddr: np.ndarray, names: list[str], linked: bool,
                   placed: bool) -> FunctionAlign:
    """The function alignment of the file's (non-cold) code: per-function sections' sh_addralign
    (the most common one), else read from the padding between neighbours in the section holding
    most functions (analyzer.func_align.infer); x86-64's 16 when neither says anything."""
    granule = granule_of(img.machine_name)
    by_sec: dict[int, list[tuple[int, int]]] = {}
    for si in fsyms.tolist():
        if "cold" in parse_clone(names[si]).kinds:
            continue
        a = int(symaddr[si]) if linked else int(table.entries["value"][si])
        by_sec.setdefault(int(table.shndx[si]), []).append((a, a + int(table.entries["size"][si])))
    if not by_sec:
        return X86 if granule == 1 else FunctionAlign(granule, granule - 1, granule, "default")
    if placed and not linked:
        aligns = [img.sections[shn].align for shn in by_sec]
        return from_section(max(set(aligns), key=lambda a: (aligns.count(a), a)), granule)
    shn, spans = max(by_sec.items(), key=lambda kv: len(kv[1]))
    got = infer(spans, granule, None if linked else img.sections[shn].align)
    if got is None:
        return X86 if granule == 1 else FunctionAlign(granule, granule - 1, granule, "default")
    return got


def analyze(path: str | Path, source_root: str | Path | None = None, remarks: tuple | list = (),
            cus: tuple[str, ...] | list[str] | None = None) -> ObjectFacts:
    """All inline and placement facts of one object (.o, .ko or vmlinux; for vmlinux pass ``cus``)."""
    images = load_images(path)
    if len(images) != 1:
        raise InputError(f"{path}: archives are not supported here; analyze the member objects")
    img = images[0]
    if img.machine not in (EM_X86_64, EM_AARCH64):
        raise InputError(f"{path}: {img.machine_name} objects are not supported (x86-64 and aarch64 only)")
    table = read_symtab(img)
    if table is None:
        raise InputError(f"{path}: no symbol table (stripped file)")
    cus = tuple(cus) if cus else None
    facts = ObjectFacts(str(path), img.machine_name, not img.relocatable)
    names = table.all_names()
    symaddr = symbol_addresses(img, table)
    fsyms = function_symbols(img, table)

    dw: DwarfFacts | None = None
    if has_dwarf(img):
        dw = read_dwarf(img, table, cus, engine="auto")
        facts.has_dwarf = True
        facts.units = [u.name or "" for u in dw.units]
        facts.producer = next((u.producer for u in dw.units if u.producer), None)
    else:
        facts.notes.append("no DWARF: declarations and inlined instances unknown; symbol and call facts only")
        if cus:
            raise InputError(f"{path}: no DWARF, cannot restrict to compilation units {', '.join(cus)}")

    # vmlinux restricted to CUs: keep only symbols inside the CUs' concrete functions
    if cus and dw is not None:
        spans = sorted(r for u in dw.units for sp in u.subprograms.values() for r in sp.ranges)
        if spans:
            lo = np.array([a for a, _ in spans], dtype=np.uint64)
            hi = np.array([b for _, b in spans], dtype=np.uint64)
            a = symaddr[fsyms]
            # overlap, not start-inside: gcc's DW_AT_low_pc comes after -fpatchable-function-entry's
            # NOPs (arm64 ftrace: 8 bytes past the symbol)
            e = a + np.maximum(table.entries["size"][fsyms].astype(np.uint64), 1) - np.uint64(1)
            k = np.searchsorted(lo, e, side="right") - 1
            inside = (k >= 0) & (a < hi[np.maximum(k, 0)])
            fsyms = fsyms[inside]
        else:
            fsyms = fsyms[:0]

    # symbol pieces, grouped by source function
    sec_funcs: dict[int, int] = {}
    for si in fsyms.tolist():
        sec_funcs[int(table.shndx[si])] = sec_funcs.get(int(table.shndx[si]), 0) + 1
    facts.placed = facts.linked or (bool(sec_funcs) and all(n == 1 for n in sec_funcs.values()))
    if not facts.placed:
        facts.notes.append("relocatable object without per-function sections: placement changes at link, "
                           "alignment figures are size-based")
    facts.align = file_alignment(img, table, fsyms, symaddr, names, facts.linked, facts.placed)
    by_addr: dict[int, str] = {}
    for si in fsyms.tolist():
        name = names[si]
        cn = parse_clone(name)
        shn = int(table.shndx[si])
        sec = img.sections[shn]
        off = int(table.entries["value"][si]) - (sec.addr if facts.linked else 0)
        size = int(table.entries["size"][si])
        pos = int(symaddr[si]) if facts.linked else off
        fa = facts.align          # in an object, a function section's own; .text.unlikely's for a cold part
        if not facts.linked and (facts.placed or ("cold" in cn.kinds and sec.align < fa.unit)):
            fa = from_section(sec.align, fa.granule)
        piece = Piece(name, size, sec.name, off, BINDINGS.get(int(table.entries["info"][si]) >> 4, "other"),
                      list(cn.kinds), placement(size, pos, facts.placed, fa))
        f = facts.functions.setdefault(cn.base, FunctionFacts(cn.base))
        if any(p.symbol == name for p in f.pieces):
            continue
        f.pieces.append(piece)
        by_addr[int(symaddr[si])] = name
    for f in facts.functions.values():
        f.out_of_line = True
        f.size = sum(p.size for p in f.pieces)
        main = min(f.pieces, key=lambda p: (p.clones.count("cold") > 0, len(p.clones), p.symbol))
        f.section, f.offset, f.binding, f.placement = main.section, main.offset, main.binding, main.placement

    # DWARF: declarations and inlined instances
    if dw is not None:
        src = decl.SourceTree(source_root, dw.units[0].comp_dir if dw.units else None)
        by_addr = _entry_shifted(by_addr, {int(symaddr[si]): int(table.entries["size"][si]) for si in fsyms.tolist()},
                                 [r[0] for u in dw.units for sp in u.subprograms.values() for r in sp.ranges[:1]])
        sym_base = {a: parse_clone(n).base for a, n in by_addr.items()}
        for u in dw.units:
            if source_root is None:
                src.comp_dir = u.comp_dir
            for off, sp in u.subprograms.items():
                root = dw.root(off)
                name = dw.name_of(off)
                if not name or (sp.declaration and not sp.ranges and sp.inline is None):
                    continue
                if sp.ranges:     # a concrete copy: its symbol names the function (clones too)
                    sym = by_addr.get(sp.ranges[0][0])
                    if sym is not None:
                        name = parse_clone(sym).base
                    elif cus is None and name not in facts.functions:
                        continue
                f = facts.functions.setdefault(name, FunctionFacts(name))
                if root is not None and root.inline is not None:
                    f.dw_inline = root.inline
                dfile, dline = dw.decl_of(off)
                if f.decl_line is None and dline is not None:
                    f.decl_file, f.decl_line = dfile, dline
            for inst in u.inlined:
                name = dw.name_of(inst.origin)
                if not name:
                    continue
                f = facts.functions.setdefault(name, FunctionFacts(name))
                f.inlined_count += 1
                f.inlined_bytes += inst.size
                cont = u.subprograms.get(inst.container) if inst.container is not None else None
                into = None
                if cont is not None and cont.ranges:
                    into = sym_base.get(cont.ranges[0][0])
                if into is None and inst.container is not None:
                    into = dw.name_of(inst.container)
                into = into or "?"
                f.inlined_into[into] = f.inlined_into.get(into, 0) + 1
        for f in facts.functions.values():
            f.declared = decl.declared(src, f.decl_file, f.decl_line, f.name)
        # drop DWARF-only functions that have neither code nor inlined copies (unused declarations)
        facts.functions = {k: v for k, v in facts.functions.items() if v.out_of_line or v.inlined_count}

    # calls
    graph: CallGraph = call_graph(img, table, set(fsyms.tolist()))
    if graph.undecodable:
        facts.notes.append(f"{graph.undecodable} undecodable byte(s) skipped during disassembly")
    for s in graph.sites:
        base = parse_clone(s.target).base
        f = facts.functions.get(base)
        if f is None or not f.out_of_line:
            continue
        f.callers[s.caller] = f.callers.get(s.caller, 0) + 1
    for sym, n in address_references(img, table, graph).items():
        f = facts.functions.get(parse_clone(sym).base)
        if f is not None:
            f.address_taken += n

    # the compilers' reports
    for r in remarks:
        facts.remarks.extend(read_remarks(r) if isinstance(r, (str, Path)) else [r])
    if facts.remarks:
        by_callee: dict[str, list[Remark]] = {}
        for r in facts.remarks:
            by_callee.setdefault(r.callee, []).append(r)
        for f in facts.functions.values():
            rs = by_callee.get(f.name, [])
            if rs:
                f.reasons = reasons_for(rs, f.name)
                seen = set()
                for r in rs:
                    key = (r.caller, r.decision, r.reason)
                    if r.decision == MISSED and key not in seen:
                        seen.add(key)
                        f.decisions.append(r.to_dict())
    facts.functions = dict(sorted(facts.functions.items()))
    return facts

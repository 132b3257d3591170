"""Write DWARF from data into a small relocatable x86-64 ELF, for tests (drgn's tests do the same).

A test describes the debug information it wants as data::

    unit = DwarfUnit(DwarfDie("compile_unit", [DwarfAttrib("name", "strx1", "a.c")], [
        DwarfDie("subprogram", [DwarfAttrib("name", "strp", "f"), DwarfAttrib("inline", "implicit_const", 3)],
                 label="f"),
        DwarfDie("inlined_subroutine", [DwarfAttrib("abstract_origin", "ref4", "f")])]), version=5)
    compile_dwarf([unit], path)

Names are the standard's without their prefix (``"strx1"`` for DW_FORM_strx1; ints are
taken as codes). Values are what a reader should give back: text for every string form
(the writer fills .debug_str, .debug_line_str, .debug_str_offsets), an address for
``addrx*`` (it fills .debug_addr), a DIE label for references (``ref*`` unit-relative,
``ref_addr`` section-absolute, across units too), bytes for blocks, ``exprloc`` and
``data16``, and for ``ranges`` a list of (low, high) pairs (it fills .debug_ranges or
.debug_rnglists and writes the offset, or the index for ``rnglistx``). Each unit gets a
line table with its ``files`` and, when it uses them, ``DW_AT_stmt_list`` and the
``DW_AT_*_base`` attributes. Every unit can be DWARF 4 or 5, 32- or 64-bit.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.dwarf.encoding import AT, FORM, LNCT, RLE, TAG, UT


@dataclass(frozen=True)
class DwarfAttrib:
    name: str | int
    form: str | int
    value: object


@dataclass(frozen=True)
class DwarfDie:
    tag: str | int
    attribs: list = field(default_factory=list)
    children: list = field(default_factory=list)
    label: str | None = None


@dataclass
class DwarfUnit:
    die: DwarfDie
    version: int = 5
    offset_size: int = 4           # 8: 64-bit DWARF
    address_size: int = 8
    files: tuple[str, ...] = ()    # the line table's file names (v5: [0] is the primary file)
    comp_dir: str = "/src"
    md5: bool = False              # DWARF 5 line table: a DW_LNCT_MD5 (data16) per file


def _code(table: dict[str, int], x: str | int, prefix: str) -> int:
    if isinstance(x, int):
        return x
    return table[x[len(prefix):] if x.startswith(prefix) else x]


def form_code(x) -> int:
    return _code(FORM, x, "DW_FORM_")


def at_code(x) -> int:
    return _code(AT, x, "DW_AT_")


def uleb(v: int) -> bytes:
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


def sleb(v: int) -> bytes:
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        if (v == 0 and not c & 0x40) or (v == -1 and c & 0x40):
            out.append(c)
            return bytes(out)
        out.append(c | 0x80)


class _Strings:
    """A string section: each text once, offsets by text."""

    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self.at: dict[str, int] = {"": 0}

    def offset(self, s: str) -> int:
        if s not in self.at:
            self.at[s] = len(self.data)
            self.data += s.encode() + b"\0"
        return self.at[s]


def _n(v: int, size: int) -> bytes:
    return v.to_bytes(size, "little")


def _initial_length(osz: int, length: int) -> bytes:
    return _n(length, 4) if osz == 4 else b"\xff\xff\xff\xff" + _n(length, 8)


class _Writer:
    def __init__(self, units: list[DwarfUnit]):
        self.units = units
        self.strs, self.line_strs = _Strings(), _Strings()
        self.sections: dict[str, bytearray] = {n: bytearray() for n in (
            ".debug_info", ".debug_abbrev", ".debug_line", ".debug_str_offsets", ".debug_addr",
            ".debug_rnglists", ".debug_ranges")}
        self.labels: dict[str, tuple[int, int]] = {}     # label -> (unit offset, DIE offset)
        self.referenced: set[str] = set()

    # the side tables of one unit: filled while its DIEs are encoded
    def _unit_tables(self, u: DwarfUnit) -> None:
        self.str_index: list[int] = []
        self.addr_index: list[int] = []
        self.rnglists: list[list[tuple[int, int]]] = []

    def _strx(self, s: str) -> int:
        off = self.strs.offset(s)
        self.str_index.append(off)
        return len(self.str_index) - 1

    def _addrx(self, a: int) -> int:
        self.addr_index.append(a)
        return len(self.addr_index) - 1

    def _value(self, u: DwarfUnit, uoff: int, at: int, fm: int, v) -> bytes:
        osz, asz = u.offset_size, u.address_size
        F = FORM
        if fm == F["addr"]:
            return _n(v, asz)
        widths = {"data1": 1, "data2": 2, "data4": 4, "data8": 8, "flag": 1}
        for name, w in widths.items():
            if fm == F[name]:
                return _n(int(v), w)
        if fm == F["udata"]:
            return uleb(v)
        if fm == F["sdata"]:
            return sleb(v)
        if fm == F["data16"]:
            assert len(v) == 16
            return bytes(v)
        if fm == F["flag_present"]:
            return b""
        if fm == F["string"]:
            return v.encode() + b"\0"
        if fm == F["strp"]:
            return _n(self.strs.offset(v), osz)
        if fm == F["line_strp"]:
            return _n(self.line_strs.offset(v), osz)
        strx = {"strx": 0, "strx1": 1, "strx2": 2, "strx3": 3, "strx4": 4}
        for name, w in strx.items():
            if fm == F[name]:
                i = self._strx(v)
                return uleb(i) if w == 0 else _n(i, w)
        addrx = {"addrx": 0, "addrx1": 1, "addrx2": 2, "addrx3": 3, "addrx4": 4}
        for name, w in addrx.items():
            if fm == F[name]:
                i = self._addrx(v)
                return uleb(i) if w == 0 else _n(i, w)
        refs = {"ref1": 1, "ref2": 2, "ref4": 4, "ref8": 8, "ref_udata": 0}
        for name, w in refs.items():
            if fm == F[name]:
                self.referenced.add(v)
                target = self.labels.get(v, (uoff, uoff))[1] - uoff
                return uleb(target) if w == 0 else _n(target, w)
        if fm == F["ref_addr"]:
            self.referenced.add(v)
            return _n(self.labels.get(v, (0, 0))[1], osz)
        if fm in (F["exprloc"], F["block"]):
            return uleb(len(v)) + bytes(v)
        if fm == F["block1"]:
            return _n(len(v), 1) + bytes(v)
        if fm == F["block2"]:
            return _n(len(v), 2) + bytes(v)
        if fm == F["block4"]:
            return _n(len(v), 4) + bytes(v)
        if fm == F["implicit_const"]:
            return b""
        if fm == F["sec_offset"] and at == AT["ranges"] and isinstance(v, list):
            return _n(self._range_offset(u, v), osz)
        if fm == F["rnglistx"]:
            self.rnglists.append(v)          # the lists themselves were written before the DIEs
            return uleb(len(self.rnglists) - 1)
        if fm == F["sec_offset"]:
            return _n(v, osz)
        raise ValueError(f"dwarfwriter: no encoding for form {fm:#x}")

    def _range_offset(self, u: DwarfUnit, ranges: list[tuple[int, int]]) -> int:
        """A range list written at once (v4 .debug_ranges; v5 .debug_rnglists outside any table)."""
        asz = u.address_size
        if u.version < 5:
            sec = self.sections[".debug_ranges"]
            off = len(sec)
            for lo, hi in ranges:
                sec += _n(lo, asz) + _n(hi, asz)
            sec += _n(0, asz) * 2
            return off
        # a v5 list referenced by sec_offset still lives inside a .debug_rnglists contribution:
        # write a contribution of its own with no offset table
        sec = self.sections[".debug_rnglists"]
        start = len(sec)
        body = _n(5, 2) + _n(asz, 1) + b"\0" + _n(0, 4)
        hdr = len(_initial_length(u.offset_size, 0))
        off = start + hdr + len(body)
        lst = self._rle(ranges, asz)
        sec += _initial_length(u.offset_size, len(body) + len(lst)) + body + lst
        return off

    @staticmethod
    def _rle(ranges: list[tuple[int, int]], asz: int) -> bytes:
        out = bytearray()
        for i, (lo, hi) in enumerate(ranges):
            if i % 2 == 0:
                out += bytes([RLE["start_end"]]) + _n(lo, asz) + _n(hi, asz)
            else:
                out += bytes([RLE["start_length"]]) + _n(lo, asz) + uleb(hi - lo)
        out.append(RLE["end_of_list"])
        return bytes(out)

    # --- one unit -------------------------------------------------------------------------
    def _abbrevs(self, die: DwarfDie, out: bytearray, codes: dict[int, int]) -> None:
        code = len(codes) + 1
        codes[id(die)] = code
        out += uleb(code) + uleb(_code(TAG, die.tag, "DW_TAG_")) + bytes([1 if die.children else 0])
        for a in die.attribs:
            out += uleb(at_code(a.name)) + uleb(form_code(a.form))
            if form_code(a.form) == FORM["implicit_const"]:
                out += sleb(a.value)
        out += b"\0\0"
        for c in die.children:
            self._abbrevs(c, out, codes)

    def _dies(self, u: DwarfUnit, uoff: int, die: DwarfDie, out: bytearray, codes: dict[int, int]) -> None:
        if die.label:
            self.labels[die.label] = (uoff, len(self.sections[".debug_info"]) + len(out))
        out += uleb(codes[id(die)])
        for a in die.attribs:
            out += self._value(u, uoff, at_code(a.name), form_code(a.form), a.value)
        if die.children:
            for c in die.children:
                self._dies(u, uoff, c, out, codes)
            out.append(0)

    def _unit_die(self, u: DwarfUnit, bases: dict[str, int]) -> DwarfDie:
        """The unit's top DIE with the attributes the writer owns added at its end (as clang does)."""
        extra = []
        if u.files:
            extra.append(DwarfAttrib("stmt_list", "sec_offset", bases["line"]))
        for key, at in (("str", "str_offsets_base"), ("addr", "addr_base"), ("rng", "rnglists_base")):
            if key in bases:
                extra.append(DwarfAttrib(at, "sec_offset", bases[key]))
        return DwarfDie(u.die.tag, [*u.die.attribs, *extra], u.die.children, u.die.label)

    def _values(self, die: DwarfDie, fm: int) -> list:
        """The values of every attribute in form ``fm``, in the order the DIEs are written."""
        out = [a.value for a in die.attribs if form_code(a.form) == fm]
        for c in die.children:
            out += self._values(c, fm)
        return out

    def _uses(self, die: DwarfDie, names: tuple[str, ...]) -> bool:
        fs = {FORM[n] for n in names}
        return any(form_code(a.form) in fs for a in die.attribs) or any(self._uses(c, names) for c in die.children)

    def write(self) -> dict[str, bytes]:
        # DIE offsets depend on ref_udata and uleb index sizes: lay out until the labels stop moving
        for _ in range(8):
            before = dict(self.labels)
            self._write_once()
            if self.labels == before:
                break
        missing = self.referenced - set(self.labels)
        if missing:
            raise ValueError(f"dwarfwriter: references to unknown labels {sorted(missing)}")
        out = {k: bytes(v) for k, v in self.sections.items() if v}
        out[".debug_str"] = bytes(self.strs.data)
        if len(self.line_strs.data) > 1:
            out[".debug_line_str"] = bytes(self.line_strs.data)
        return out

    def _write_once(self) -> None:
        for k in self.sections:
            self.sections[k] = bytearray()
        self.strs, self.line_strs = _Strings(), _Strings()
        for u in self.units:
            self._unit_tables(u)
            osz, hdr = u.offset_size, len(_initial_length(u.offset_size, 0))
            bases: dict[str, int] = {}
            if u.files:
                bases["line"] = len(self.sections[".debug_line"])
                self.sections[".debug_line"] += self._line_table(u)
            v5 = u.version >= 5
            if v5 and self._uses(u.die, ("strx", "strx1", "strx2", "strx3", "strx4")):
                bases["str"] = len(self.sections[".debug_str_offsets"]) + hdr + 4
            if v5 and self._uses(u.die, ("addrx", "addrx1", "addrx2", "addrx3", "addrx4")):
                bases["addr"] = len(self.sections[".debug_addr"]) + hdr + 4
            rnglistx = self._values(u.die, FORM["rnglistx"])
            if v5 and rnglistx:
                # the unit's rnglistx contribution: header, offset table, the lists in DIE order
                sec = self.sections[".debug_rnglists"]
                lists = [self._rle(r, u.address_size) for r in rnglistx]
                table, pos = bytearray(), len(lists) * osz
                for lst in lists:
                    table += _n(pos, osz)
                    pos += len(lst)
                body = _n(5, 2) + bytes([u.address_size, 0]) + _n(len(lists), 4) + table + b"".join(lists)
                bases["rng"] = len(sec) + hdr + 8
                sec += _initial_length(osz, len(body)) + body
            die = self._unit_die(u, bases)
            abbrev_off = len(self.sections[".debug_abbrev"])
            codes: dict[int, int] = {}
            self._abbrevs(die, self.sections[".debug_abbrev"], codes)
            self.sections[".debug_abbrev"].append(0)
            info = self.sections[".debug_info"]
            uoff = len(info)
            if v5:
                header = _n(5, 2) + bytes([UT["compile"], u.address_size]) + _n(abbrev_off, osz)
            else:
                header = _n(u.version, 2) + _n(abbrev_off, osz) + bytes([u.address_size])
            body = bytearray()
            info += _initial_length(osz, 0) + header        # length patched below
            self._dies(u, uoff, die, body, codes)
            info += body
            info[uoff:uoff + hdr] = _initial_length(osz, len(info) - uoff - hdr)
            if "str" in bases:
                sec = self.sections[".debug_str_offsets"]
                entries = b"".join(_n(o, osz) for o in self.str_index)
                sec += _initial_length(osz, 4 + len(entries)) + _n(5, 2) + b"\0\0" + entries
            if "addr" in bases:
                sec = self.sections[".debug_addr"]
                entries = b"".join(_n(a, u.address_size) for a in self.addr_index)
                sec += _initial_length(osz, 4 + len(entries)) + _n(5, 2) + bytes([u.address_size, 0]) + entries

    def _line_table(self, u: DwarfUnit) -> bytes:
        osz = u.offset_size
        std = bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])
        params = bytes([1, 1, 1]) + struct.pack("<b", -5) + bytes([14, 13]) + std
        if u.version >= 5:
            dirs = [u.comp_dir]
            for f in u.files:
                d = f.rsplit("/", 1)[0] if "/" in f else None
                if d and not d.startswith("/") and d not in dirs:
                    dirs.append(d)
            hdr = bytearray(params)
            hdr += bytes([1]) + uleb(LNCT["path"]) + uleb(FORM["line_strp"])
            hdr += uleb(len(dirs)) + b"".join(_n(self.line_strs.offset(d), osz) for d in dirs)
            fmt = [(LNCT["path"], FORM["line_strp"]), (LNCT["directory_index"], FORM["udata"])]
            if u.md5:
                fmt.append((LNCT["MD5"], FORM["data16"]))
            hdr += bytes([len(fmt)]) + b"".join(uleb(c) + uleb(f) for c, f in fmt)
            hdr += uleb(len(u.files))
            for i, f in enumerate(u.files):
                d, name = (f.rsplit("/", 1) if "/" in f and not f.startswith("/") else (None, f))
                hdr += _n(self.line_strs.offset(name), osz) + uleb(dirs.index(d) if d else 0)
                if u.md5:
                    hdr += bytes((i * 16 + k) & 0xFF for k in range(16))
            pre = _n(5, 2) + bytes([u.address_size, 0])
        else:
            hdr = bytearray(params if u.version >= 4 else params[:1] + params[2:])
            dirs = []
            for f in u.files:
                d = f.rsplit("/", 1)[0] if "/" in f and not f.startswith("/") else None
                if d and d not in dirs:
                    dirs.append(d)
            hdr += b"".join(d.encode() + b"\0" for d in dirs) + b"\0"
            for f in u.files:
                d, name = (f.rsplit("/", 1) if "/" in f and not f.startswith("/") else (None, f))
                hdr += name.encode() + b"\0" + uleb(dirs.index(d) + 1 if d else 0) + b"\0\0"
            hdr += b"\0"
            pre = _n(u.version, 2)
        program = b"\0\x01\x01"               # DW_LNE_end_sequence
        rest = pre + _n(len(hdr), osz) + bytes(hdr) + program
        return _initial_length(osz, len(rest)) + rest


def dwarf_sections(units: list[DwarfUnit]) -> dict[str, bytes]:
    """The debug sections (name -> bytes) of ``units``."""
    return _Writer(list(units)).write()


def dwarf_layout(units: list[DwarfUnit]) -> tuple[dict[str, bytes], dict[str, int]]:
    """The debug sections and where each labelled DIE landed (its .debug_info offset)."""
    w = _Writer(list(units))
    secs = w.write()
    return secs, {k: off for k, (_u, off) in w.labels.items()}


# --- the ELF container ------------------------------------------------------------------------

def elf_file(sections: dict[str, bytes], symbols: list[tuple[str, int, int]] = (), text: bytes | None = None) -> bytes:
    """A relocatable x86-64 ELF with .text, the given sections, and a symbol table holding a
    section symbol for .text and the (name, value, size) functions in it (.text is made long
    enough to hold them)."""
    if text is None:
        text = b"\xc3" * max([64, *(v + n for _name, v, n in symbols)])
    names = [".text", *sections, ".symtab", ".strtab", ".shstrtab"]
    shstr = bytearray(b"\0")
    name_off = {}
    for n in names:
        name_off[n] = len(shstr)
        shstr += n.encode() + b"\0"
    strtab = bytearray(b"\0")
    syms = bytearray(24)                                          # the null symbol
    syms += struct.pack("<IBBHQQ", 0, 3, 0, 1, 0, 0)            # STT_SECTION .text
    for name, value, size in symbols:
        off = len(strtab)
        strtab += name.encode() + b"\0"
        syms += struct.pack("<IBBHQQ", off, (1 << 4) | 2, 0, 1, value, size)   # GLOBAL FUNC in .text
    contents = [text, *sections.values(), bytes(syms), bytes(strtab), bytes(shstr)]
    out = bytearray(64)
    offsets = []
    for c in contents:
        out += b"\0" * (-len(out) % 8)
        offsets.append(len(out))
        out += c
    out += b"\0" * (-len(out) % 8)
    shoff = len(out)
    nsec = len(names) + 1
    strtab_i = names.index(".strtab") + 1
    out += bytes(64)                                             # the null section header
    for i, (n, c) in enumerate(zip(names, contents)):
        if n == ".text":
            hdr = (1, 0x6, 0, 16, 0, 0, 0)                       # PROGBITS, ALLOC|EXECINSTR
        elif n == ".symtab":
            hdr = (2, 0, strtab_i, 8, 24, 2, 0)                  # SYMTAB: link .strtab, first global 2
        elif n in (".strtab", ".shstrtab"):
            hdr = (3, 0, 0, 1, 0, 0, 0)
        else:
            hdr = (1, 0, 0, 1, 0, 0, 0)
        typ, flags, link, align, entsize, info, _ = hdr
        out += struct.pack("<IIQQQQIIQQ", name_off[n], typ, flags, 0, offsets[i], len(c), link, info, align,
                           entsize)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    out[:64] = ident + struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, nsec, nsec - 1)
    return bytes(out)


def compile_dwarf(units: list[DwarfUnit], path: Path, symbols: list[tuple[str, int, int]] = ()) -> Path:
    """Write ``units`` as the DWARF of a relocatable ELF at ``path``."""
    path.write_bytes(elf_file(dwarf_sections(units), symbols))
    return path

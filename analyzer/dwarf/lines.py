"""File names of a unit's line table header (DW_AT_decl_file and DW_AT_call_file indexes).

Functions of a :class:`~analyzer.dwarf.walker.Walker` (its sections, string resolution and
budget): DWARF 2-4 headers (include directories and file entries as strings) and DWARF 5
headers (entry formats of content types and forms, decoded with the same form reader as the
DIEs). Counts are checked against the header's bytes before anything is built.
"""
from __future__ import annotations

from typing import Protocol

from analyzer.dwarf.encoding import FORM, LNCT, LebTooLong, corrupt, fixed, read_form, uleb
from analyzer.errors import InputError

F_IMPLICIT = FORM["implicit_const"]


class Reader(Protocol):
    """What the line table needs of the walker: the section, string forms, a cache, a budget."""
    line: bytes
    bo: str
    file_tables: dict[int, list[str | None]]
    line_budget: int

    def forms(self, asz: int, osz: int) -> tuple[dict, dict]: ...

    def string(self, fm: int, v, cu: dict) -> str | None: ...


def file_table(w: Reader, off: int, cu: dict) -> list[str | None]:
    """File names by DW_AT_decl_file index (DWARF 5: 0 is the primary file; 4: 1-based),
    from the header of the line program at ``off`` in .debug_line."""
    got = w.file_tables.get(off)
    if got is None:
        try:
            got = _decode(w, off, cu)
        except IndexError:
            raise corrupt(".debug_line", off, "line table header runs past the end of the section") from None
        except LebTooLong as e:
            raise corrupt(".debug_line", e.pos, str(e)) from None
        w.file_tables[off] = got
    return got


def _decode(w: Reader, off: int, cu: dict) -> list[str | None]:
    b, bo, sec = w.line, w.bo, ".debug_line"
    if not w.line:
        return []
    if not 0 <= off < len(b):
        raise corrupt(sec, off, f"line table offset past the end of the section ({len(b):#x} bytes)")
    length, p, osz = fixed(b, off, 4, sec, bo), off + 4, 4
    if length == 0xFFFFFFFF:
        length, p, osz = fixed(b, p, 8, sec, bo), p + 8, 8
    end = p + length
    if end > len(b):
        raise corrupt(sec, off, f"line table length {length:#x} past the end of the section")
    ver = fixed(b, p, 2, sec, bo)
    p += 2
    if ver not in (2, 3, 4, 5):
        raise InputError(f"unsupported line table version {ver} (.debug_line+{off:#x})")
    if ver >= 5:
        asz = b[p]
        p += 2                                  # address_size, segment_selector_size
    else:
        asz = cu["asz"]
    hlen = fixed(b, p, osz, sec, bo)
    p += osz
    hend = p + hlen
    w.line_budget -= hend - off
    if w.line_budget < 0:
        raise corrupt(sec, off, "line table headers overlap beyond any real file (parse budget spent)")
    if hend > end:
        raise corrupt(sec, off, f"line table header length {hlen:#x} past the end of its table")
    p += 5 if ver >= 4 else 4                   # min_inst_length, [max_ops], default_is_stmt, line_base, range
    opcode_base = b[p]
    p += opcode_base                            # opcode_base itself + the standard opcode lengths
    if ver >= 5:
        shapes, _sizes = w.forms(asz if asz in (1, 2, 4, 8) else cu["asz"], osz)
        entries, p = _entries(w, b, p, hend, shapes, "directory")
        dirs = [_entry_path(w, e, cu) for e in entries]
        out = []
        for e in _entries(w, b, p, hend, shapes, "file name")[0]:
            name = _entry_path(w, e, cu)
            di = e.get(LNCT["directory_index"], (None, 0))[1]
            d = dirs[di] if isinstance(di, int) and 0 <= di < len(dirs) else None
            out.append(_join(d, name))
        return out
    dirs: list[str | None] = [None]
    while True:
        if p >= hend:
            raise corrupt(sec, p, "include directories run past the line table header")
        if b[p] == 0:
            p += 1
            break
        z = b.find(b"\0", p, hend)
        if z < 0:
            raise corrupt(sec, p, "include directory without a terminating NUL")
        dirs.append(b[p:z].decode("utf-8", "surrogateescape"))
        p = z + 1
    out = [None]
    while True:
        if p >= hend:
            raise corrupt(sec, p, "file names run past the line table header")
        if b[p] == 0:
            break
        z = b.find(b"\0", p, hend)
        if z < 0:
            raise corrupt(sec, p, "file name without a terminating NUL")
        name = b[p:z].decode("utf-8", "surrogateescape")
        di, p = uleb(b, z + 1)
        _mtime, p = uleb(b, p)
        _size, p = uleb(b, p)
        out.append(_join(dirs[di] if di < len(dirs) else None, name))
    return out


def _entries(w: Reader, b: bytes, p: int, hend: int, shapes: dict, what: str) -> tuple[list[dict], int]:
    """DWARF 5 directory or file name entries: a format (content type, form) list, a count,
    then the entries; the count is checked against the bytes left in the header."""
    sec = ".debug_line"
    nfmt = b[p]
    p += 1
    fmt = []
    for _ in range(nfmt):
        ct, p = uleb(b, p)
        fm, p = uleb(b, p)
        fmt.append((ct, fm))
    count, p = uleb(b, p)
    if count and not fmt:
        raise corrupt(sec, p, f"{count} {what} entries without a format")
    if count > hend - p:        # every entry takes at least one byte
        raise corrupt(sec, p, f"{count} {what} entries in a header of {hend - p} bytes")
    out = []
    for _ in range(count):
        e = {}
        for ct, fm in fmt:
            if fm == F_IMPLICIT:
                raise corrupt(sec, p, f"DW_FORM_implicit_const in a {what} entry")
            v, p = read_form(b, p, fm, shapes, w.bo, sec)
            if p > hend:
                raise corrupt(sec, p, f"{what} entries run past the line table header")
            e[ct] = (fm, v)
        out.append(e)
    return out, p


def _entry_path(w: Reader, e: dict, cu: dict) -> str | None:
    fv = e.get(LNCT["path"])
    if fv is None:
        return None
    fm, v = fv
    s = w.string(fm, v, cu)
    return s if s is not None or not isinstance(v, (bytes, bytearray)) else v.decode("utf-8", "surrogateescape")


def _join(d: str | None, name: str | None) -> str | None:
    if name and not name.startswith("/") and d:
        return f"{d.rstrip('/')}/{name}"
    return name

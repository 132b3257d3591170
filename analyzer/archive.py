"""The members of a Unix ``ar`` archive (``built-in.a``), regular or thin, read defensively.

Every header field is range-checked before use: a size must be decimal digits (a negative
one used to send the reader backwards forever); a member's size running past the end of the
file is cut there and ends the archive, as binutils reads it (nm lists that member from the
bytes there are and stops, without a word); a long-name
offset must point into the name table, and the position always advances. A thin
archive's members are files named by the archive; each is opened like any input file
(:func:`analyzer.files.open_input`: never a FIFO, device, directory or symlink loop).
"""
from __future__ import annotations

import os
from pathlib import Path

from analyzer.errors import InputError
from analyzer.files import open_input

MAGIC = b"!<arch>\n"
THIN_MAGIC = b"!<thin>\n"
_HEADER = 60


class Member:
    """One member: its bytes (from the archive, or from the file a thin archive names)."""
    __slots__ = ("name", "label", "data", "real_size")

    def __init__(self, name: str, label: str, data: memoryview, real_size: int):
        self.name = name
        self.label = label            # "archive(member)", for messages
        self.data = data
        self.real_size = real_size    # bytes really stored (see analyzer.files.Input)


def is_archive(data: memoryview | bytes) -> bool:
    return bytes(data[:8]) in (MAGIC, THIN_MAGIC)


def _size(field: bytes, path: Path, pos: int) -> int:
    text = field.decode("ascii", "replace").strip()
    if not text.isdigit() or not text.isascii():
        what = "negative" if text.startswith("-") else "not a decimal number"
        raise InputError(f"{path}: broken archive member header at {pos:#x} (size {text!r} is {what})")
    return int(text)


def _long_name(longnames: bytes, ref: str, path: Path, pos: int) -> str:
    """``/<offset>`` into the long name table; binutils reads the number with strtol and
    ignores the rest: ``ar cDPrST`` (kbuild's) writes e.g. "/0             /"."""
    digits = ref[1:len(ref) - len(ref[1:].lstrip("0123456789"))]
    off = int(digits)
    if off >= len(longnames):
        raise InputError(f"{path}: broken archive member header at {pos:#x} "
                         f"(long name offset {off} past the name table of {len(longnames)} bytes)")
    end = longnames.find(b"/\n", off)
    name = longnames[off:end if end >= 0 else None].decode("utf-8", "surrogateescape")
    if not name or "\0" in name:
        raise InputError(f"{path}: broken archive member header at {pos:#x} (empty or invalid long name)")
    return name


def members(path: Path, data: memoryview, real_size: int | None = None) -> list[Member]:
    """Every object member of the archive at ``path`` whose bytes are ``data``."""
    thin = bytes(data[:8]) == THIN_MAGIC
    real = len(data) if real_size is None else real_size
    pos, n = 8, len(data)
    longnames = b""
    out: list[Member] = []
    while pos < n:
        if pos + _HEADER > n:
            if not bytes(data[pos:n]).strip(b"\n"):     # trailing padding newline(s)
                break
            raise InputError(f"{path}: truncated archive member header at {pos:#x}")
        hdr = bytes(data[pos:pos + _HEADER])
        if hdr[58:60] != b"`\n":
            raise InputError(f"{path}: broken archive member header at {pos:#x}")
        name = hdr[:16].decode("latin-1").rstrip()
        size = _size(hdr[48:58], path, pos)
        body = pos + _HEADER
        index = name in ("/", "/SYM64/") and pos == 8
        names_table = name == "//" and not out and not longnames
        stored = not thin or index or names_table
        cut = stored and body + size > n
        if cut and (index or names_table):
            raise InputError(f"{path}: truncated archive member {name!r} at {pos:#x} "
                             f"(size {size} past the end of the file)")
        if cut:       # nm reads the member as the bytes there are, then finds no next header and stops
            size = n - body
        nxt = body + size + (size & 1) if stored else body
        if index:                               # the symbol index comes first (as binutils reads it)
            pos = nxt
            continue
        if names_table:                         # then the long name table (stored even in thin archives)
            longnames = bytes(data[body:body + size])
            pos = nxt
            continue
        if name.startswith("/") and name[1:2].isdigit():
            name = _long_name(longnames, name, path, pos)
        else:
            name = name.rstrip("/") or name
        label = f"{path}({name})"
        if thin:
            member_path = Path(name) if os.path.isabs(name) else path.parent / name
            got = open_input(member_path, f"{label}: {member_path}")
            if is_archive(got.data):
                raise InputError(f"{label}: nested archives are not supported")
            out.append(Member(name, label, got.data, got.real_size))
        else:
            out.append(Member(name, label, data[body:body + size], min(size, real)))
        pos = nxt
    return out

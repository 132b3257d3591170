"""A built object as store rows: nm's symbol list (with offsets) and size(1)'s section figures.

The rows are what bloat-o-meter would read, so reports regenerate its tables
from the store without the .o files (tests compare with sizediff byte for byte).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from analyzer.elf import load_images, read_symtab
from analyzer.errors import InputError
from analyzer.nm import letters
from analyzer.sections import section_sizes
from db.models import ObjectRecord, SymbolRow


def symbol_rows(path: str | os.PathLike) -> list[SymbolRow]:
    """``nm --size-sort`` of every image in the file, plus st_value (numpy columns, no per-symbol ELF objects)."""
    import numpy as np
    rows: list[SymbolRow] = []
    images = load_images(path)
    found = False
    for img in images:
        table = read_symtab(img)
        if table is None:
            continue
        found = True
        keep, codes = letters(table)
        idx = np.flatnonzero(keep)
        names = table.names(idx)
        sizes = table.entries["size"][idx].tolist()
        values = table.entries["value"][idx].tolist()
        shndx = table.shndx[idx].tolist()
        code = codes[idx].tobytes().decode("ascii")
        secnames = [s.name for s in img.sections]
        nsec = len(secnames)
        for name, size, value, sec, letter in zip(names, sizes, values, shndx, code):
            rows.append(SymbolRow(name, size, letter, secnames[sec] if sec < nsec else None, value))
    if not found:
        raise InputError(f"{path}: no symbols (stripped file?)")
    return rows


def object_record(path: str | os.PathLike, rel: str) -> ObjectRecord:
    """Everything the store keeps about one object, read from the file at ``path``."""
    p = Path(path)
    images = load_images(p)
    sz = section_sizes(images)
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return ObjectRecord(rel, h.hexdigest(), sz.text, sz.data, sz.bss, dict(sz.alloc), symbol_rows(p))

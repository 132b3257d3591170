"""Per-unit inline cost kept between builds, keyed by the unit's object file (issue 14, per patch).

A one-file patch relinks vmlinux: every unit's ``.debug_info`` bytes change (addresses, string and
line-table offsets), so a key over those bytes would almost never hit. kbuild rebuilds only the
changed ``.o``: a unit's key is the SHA-256 of ``<build_dir>/<unit>.o`` (with the unit's name and
:data:`analyzer.inline_units.UNIT_COST_FORMAT`), taken only while the build dir is locked and its
``vmlinux`` is the very file analysed (same GNU build-id), so the objects hashed are the ones linked.
Units without an object there (generated or missing) have no key and are decoded each time.

The entries (:class:`UnitCache`) are JSON files under ``<sizewatch cache>/inline-units``, written
atomically (a temp file renamed), bounded in total size (oldest used first out), and checked when
read: the key inside, a SHA-256 of the payload, and :meth:`UnitCost.from_dict`'s checks. A damaged
entry is deleted and the unit decoded again: it never reaches the result.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
from pathlib import Path, PurePosixPath

from analyzer.elf import load_images
from analyzer.errors import InputError
from analyzer.inline_units import UNIT_COST_FORMAT, UnitCost, unit_names
from toolchains.kbuild import prepare_lock
from toolchains.locks import file_lock
from toolchains.source import cache_dir

CACHE_LIMIT = 256 << 20             # bytes of entries kept (a Debian vmlinux's 2,172 units: 12 MB)
ENTRY_LIMIT = 16 << 20              # one unit's entry (the biggest Debian unit's: well under 1 MB)
NT_GNU_BUILD_ID = 3
SHT_NOTE = 7


class UnitCache:
    """UnitCost entries by key, as files under ``root`` (see the module docstring)."""

    def __init__(self, root: Path | None = None, limit: int = CACHE_LIMIT):
        self.root = Path(root) if root is not None else cache_dir() / "inline-units"
        self.limit = limit
        self.damaged = 0                # entries found damaged (and removed) by get

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> UnitCost | None:
        p = self._path(key)
        try:
            st = p.stat()
            if not stat.S_ISREG(st.st_mode) or st.st_size > ENTRY_LIMIT:
                raise InputError("not a regular file of an entry's size")
            raw = p.read_bytes()
        except FileNotFoundError:
            return None
        except (OSError, InputError):
            raw = b""                   # refused below, as damaged
        try:
            head, _nl, payload = raw.partition(b"\n")
            doc = json.loads(head)
            if (type(doc) is not dict or doc.get("key") != key
                    or doc.get("sha256") != hashlib.sha256(payload).hexdigest()):
                raise InputError("key or checksum does not match")
            cost = UnitCost.from_dict(json.loads(payload))
        except (ValueError, RecursionError, InputError):
            self.damaged += 1
            try:
                p.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(p)                 # recently used: kept longest
        except OSError:
            pass
        return cost

    def put(self, key: str, cost: UnitCost) -> None:
        """One line ``{"key", "sha256" of the payload}``, then the payload (UnitCost.to_dict)."""
        payload = json.dumps(cost.to_dict(), separators=(",", ":")).encode()
        head = json.dumps({"key": key, "sha256": hashlib.sha256(payload).hexdigest()}).encode()
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(head + b"\n" + payload)
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def prune(self) -> int:
        """Delete the least recently used entries until the total is under ``limit``; returns how
        many were deleted."""
        entries = []
        total = 0
        for p in self.root.glob("*/*.json"):
            try:
                st = p.stat()
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
            total += st.st_size
        deleted = 0
        for _t, size, p in sorted(entries):
            if total <= self.limit:
                break
            try:
                p.unlink()
            except OSError:
                continue
            total -= size
            deleted += 1
        return deleted


def build_id(path: Path) -> bytes | None:
    """The GNU build-id note of an ELF file (None: none)."""
    try:
        images = load_images(path)
    except InputError:
        return None
    if len(images) != 1:
        return None
    img = images[0]
    fmt = "<III" if img.little else ">III"
    for sec in img.sections:            # .note.gnu.build-id, or the kernel's .notes
        if sec.type != SHT_NOTE or sec.nobits:
            continue
        b = bytes(img.section_bytes(sec))
        p = 0
        while p + 12 <= len(b):
            namesz, descsz, kind = struct.unpack_from(fmt, b, p)
            name_end = p + 12 + ((namesz + 3) & ~3)
            desc_end = name_end + descsz
            if desc_end > len(b):
                break
            if kind == NT_GNU_BUILD_ID and b[p + 12:p + 12 + namesz].rstrip(b"\0") == b"GNU" and descsz:
                return b[name_end:desc_end]
            p = name_end + ((descsz + 3) & ~3)
    return None


def object_of(unit: str | None, build_dir: Path, source_dir: Path | None) -> Path | None:
    """``<build_dir>/<dir>/<file>.o`` of a unit named ``/src/mm/page_alloc.c`` or ``mm/page_alloc.c``
    (None: not a kbuild source file, or outside both trees)."""
    if not unit:
        return None
    p = PurePosixPath(unit)
    if p.is_absolute():
        for top in (source_dir, build_dir):
            if top is not None:
                try:
                    p = p.relative_to(str(top))
                    break
                except ValueError:
                    continue
        else:
            return None
    if p.suffix not in (".c", ".S") or ".." in p.parts or not p.parts:
        return None
    return build_dir / p.with_suffix(".o")


def linked_here(vmlinux: Path, build_dir: Path) -> bool:
    """The build dir's vmlinux is this file (same GNU build-id): its objects are the ones linked."""
    mine = build_id(vmlinux)
    return mine is not None and build_id(build_dir / "vmlinux") == mine


def object_keys(vmlinux: Path, build_dir: Path, source_dir: Path | None) -> dict[str, str] | None:
    """Unit name -> cache key (the SHA-256 of the unit's object) for the units of ``vmlinux`` whose
    object is in ``build_dir``; None when the build dir's vmlinux is not this file (its objects may
    not be the ones linked). Called right after the build, holding the build dir's lock, before
    another build of that dir can start."""
    with file_lock(prepare_lock(build_dir)):
        if not linked_here(vmlinux, build_dir):
            return None
        try:
            names = unit_names(vmlinux)
        except InputError:
            return None
        keys: dict[str, str] = {}
        for name in names:
            obj = object_of(name, build_dir, source_dir)
            if obj is None or name is None or name in keys:
                continue
            h = hashlib.sha256()
            try:
                with open(obj, "rb") as f:
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
            except OSError:
                continue
            keys[name] = hashlib.sha256(f"{UNIT_COST_FORMAT}\0{name}\0{h.hexdigest()}".encode()).hexdigest()
        if not linked_here(vmlinux, build_dir):
            return None
        return keys

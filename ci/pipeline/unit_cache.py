"""Per-unit inline cost kept between builds, keyed by the unit's object file (issue 14, per patch).

A one-file patch relinks vmlinux: every unit's ``.debug_info`` bytes change (addresses, string and
line-table offsets), so a key over those bytes would almost never hit. kbuild rebuilds only the
changed ``.o``: a unit's key is the SHA-256 of ``<build_dir>/<unit>.o`` (with the unit's name and
:data:`analyzer.inline_units.UNIT_COST_FORMAT`), taken only while the build dir is locked and its
``vmlinux`` is the very file analysed (same GNU build-id), so the objects hashed are the ones linked.
Units without an object there (generated or missing) have no key and are decoded each time.
Under LTO (the objects are LLVM bitcode) nothing is keyed: a unit's code is made at the link with
code imported from other units, so its .o alone does not determine it; the vmlinux is decoded whole.
The digests are remembered under the cache with each object's stat, so only objects kbuild
rewrote are read again (:func:`object_keys`).

The entries (:class:`UnitCache`) are JSON files under ``<sizewatch cache>/inline-units``, written
atomically (a temp file renamed), bounded in total size (oldest used first out), and checked when
read: the key inside, an HMAC-SHA256 of key and payload under a secret kept outside the cache
(:mod:`ci.pipeline.cache_key`: the cache dir is shared, and a plain checksum is one a forger
recomputes), and :meth:`UnitCost.from_dict`'s checks. A damaged or forged entry is deleted and the
unit decoded again: it never reaches the result. An entry's file name is derived from the secret
too, so processes with different keys on one cache dir keep apart rather than take each other's
entries for forgeries.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import struct
import tempfile
from pathlib import Path, PurePosixPath

from analyzer.elf import BITCODE_MAGIC, load_images
from analyzer.errors import InputError
from analyzer.files import read_input
from analyzer.inline_units import UNIT_COST_FORMAT, UnitCost, unit_names
from ci.pipeline.cache_key import unit_cache_key
from toolchains.kbuild import prepare_lock
from toolchains.locks import file_lock
from toolchains.source import cache_dir

CACHE_LIMIT = 256 << 20             # bytes of entries kept (a Debian vmlinux's 2,172 units: 12 MB)
ENTRY_LIMIT = 16 << 20              # one unit's entry (the biggest Debian unit's: well under 1 MB)
NT_GNU_BUILD_ID = 3
SHT_NOTE = 7


class UnitCache:
    """UnitCost entries by key, as files under ``root`` (see the module docstring)."""

    def __init__(self, root: Path | None = None, limit: int = CACHE_LIMIT, secret: bytes | None = None):
        self.root = Path(root) if root is not None else cache_dir() / "inline-units"
        self.limit = limit
        self.damaged = 0                # entries found damaged or forged (and removed) by get
        self._secret = secret           # None: the user's key (cache_key), read on first use

    def _mac(self, what: bytes) -> str:
        if self._secret is None:
            self._secret = unit_cache_key()
        return hmac.new(self._secret, what, hashlib.sha256).hexdigest()

    def _path(self, key: str) -> Path:
        name = self._mac(b"name\0" + key.encode())
        return self.root / name[:2] / f"{name}.json"

    def _seal(self, key: str, payload: bytes) -> str:
        """The entry's HMAC: over its key and its payload, so neither can be swapped or edited."""
        return self._mac(b"entry\0" + key.encode() + b"\0" + payload)

    def get(self, key: str) -> UnitCost | None:
        p = self._path(key)
        try:
            raw = _read_entry(p)
        except FileNotFoundError:
            return None
        except (OSError, InputError):
            raw = b""                   # refused below, as damaged
        try:
            head, _nl, payload = raw.partition(b"\n")
            doc = json.loads(head)
            if (type(doc) is not dict or doc.get("key") != key or type(doc.get("hmac")) is not str
                    or not hmac.compare_digest(doc["hmac"], self._seal(key, payload))):
                raise InputError("key or HMAC does not match")
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
        """One line ``{"key", "hmac" of key and payload}``, then the payload (UnitCost.to_dict)."""
        payload = json.dumps(cost.to_dict(), separators=(",", ":")).encode()
        head = json.dumps({"key": key, "hmac": self._seal(key, payload)}).encode()
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


def _read_entry(p: Path) -> bytes:
    """An entry's bytes: a regular file of at most an entry's size, never through a symbolic link
    (ELOOP) and never blocking on a FIFO."""
    fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > ENTRY_LIMIT:
            raise InputError("not a regular file of an entry's size")
        return f.read(ENTRY_LIMIT + 1)


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


SETTLED_NS = 2_000_000_000          # an object is trusted by its stat only if unchanged this long before hashing


def hashes_path(build_dir: Path) -> Path:
    """Where :func:`object_keys` remembers a build dir's object digests: under the sizewatch cache,
    which a sandboxed build cannot see (a memo in the build dir could be planted by the build)."""
    name = hashlib.sha256(str(Path(build_dir).resolve()).encode()).hexdigest()[:32]
    return cache_dir() / "object-hashes" / f"{name}.json"


def object_keys(vmlinux: Path, build_dir: Path, source_dir: Path | None) -> dict[str, str] | None:
    """Unit name -> cache key (the SHA-256 of the unit's object) for the units of ``vmlinux`` whose
    object is in ``build_dir``; None when the build dir's vmlinux is not this file (its objects may
    not be the ones linked). Called right after the build, holding the build dir's lock, before
    another build of that dir can start.

    A defconfig's 2,682 objects take 0.9 s to hash; a one-file patch rewrites a handful. Each
    digest is remembered (:func:`hashes_path`) with the object's stat (size, inode, mtime and
    ctime in ns) and reused while the stat is unchanged, as git's index does; an object changed
    within :data:`SETTLED_NS` before its hashing is hashed again next time (git's "racily clean"
    rule: a rewrite in the same clock tick would keep its times). "Before" is read from the build
    dir's own filesystem clock (a file made there), not this host's."""
    with file_lock(prepare_lock(build_dir)):
        if not linked_here(vmlinux, build_dir):
            return None
        try:
            names = unit_names(vmlinux)
        except InputError:
            return None
        memo_path = hashes_path(build_dir)
        memo = _read_hashes(memo_path)
        stamp = _fs_now(build_dir)
        kept: dict[str, list] = {}
        keys: dict[str, str] = {}
        c_checked = False
        for name in names:
            obj = object_of(name, build_dir, source_dir)
            if obj is None or name is None or name in keys:
                continue
            if not c_checked and obj.suffix == ".o" and name.endswith(".c"):
                c_checked = True        # LTO compiles every C unit to bitcode (assembly stays ELF):
                if _bitcode(obj):       # its code is made at the link, with code imported from other
                    return None         # units, so its .o alone does not key it; decoded whole
            digest = _object_sha256(obj, str(obj.relative_to(build_dir)), memo, kept, stamp)
            if digest is not None:
                keys[name] = hashlib.sha256(f"{UNIT_COST_FORMAT}\0{name}\0{digest}".encode()).hexdigest()
        if not linked_here(vmlinux, build_dir):
            return None
        _write_hashes(memo_path, kept)
        return keys


def _bitcode(obj: Path) -> bool:
    """The object is LLVM bitcode (an LTO build's unit), not machine code."""
    try:
        fd = os.open(obj, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode) and f.read(4) in BITCODE_MAGIC
        except OSError:
            return False


def _fs_now(directory: Path) -> int | None:
    """The filesystem's "now" in ns, as it stamps a file made in ``directory`` (None: cannot)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".sizewatch-stamp-")
    except OSError:
        return None
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _object_sha256(obj: Path, rel: str, memo: dict[str, list], kept: dict[str, list],
                   stamp: int | None) -> str | None:
    """The object's SHA-256: the memo's when its stat is unchanged and had settled when it was
    hashed, else read (and remembered when ``stamp``, the filesystem's time before this round of
    hashing, is known). None: not a regular file, or unreadable."""
    try:
        st = os.stat(obj)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    now = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    got = memo.get(rel)
    if got is not None and got[:4] == now and got[4] - max(now[2], now[3]) >= SETTLED_NS:
        kept[rel] = got
        return got[5]
    h = hashlib.sha256()
    try:            # not blocking on a FIFO put there after the stat above; regular files only
        fd = os.open(obj, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            while chunk := f.read(1 << 20):
                h.update(chunk)
            after = os.fstat(fd)
        except OSError:
            return None
    if stamp is not None and [after.st_size, after.st_ino, after.st_mtime_ns, after.st_ctime_ns] == now:
        kept[rel] = now + [stamp, h.hexdigest()]
    return h.hexdigest()


def _read_hashes(path: Path) -> dict[str, list]:
    """The memo of :func:`object_keys` ({} when missing or damaged: every object is hashed)."""
    try:
        if path.stat().st_size > ENTRY_LIMIT:
            return {}
        d = json.loads(read_input(path))
    except (OSError, InputError, ValueError, RecursionError):
        return {}
    if type(d) is not dict or d.get("format") != 1 or type(d.get("objects")) is not dict:
        return {}
    return {k: v for k, v in d["objects"].items()
            if type(v) is list and len(v) == 6 and all(type(x) is int for x in v[:5]) and type(v[5]) is str
            and len(v[5]) == 64}


def _write_hashes(path: Path, kept: dict[str, list]) -> None:
    """Written atomically; a cache that cannot take it only costs the hashing next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-hashes-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"format": 1, "objects": kept}, f, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass

"""Opening an input file that a stranger may have made: never block, never trust a size.

Objects and archives come from any build; a path may name a FIFO (opening it for
reading blocks until a writer appears), a device (opening a tape or a terminal
has side effects), a directory or a symlink loop. So the type is checked with
``stat`` before opening, the file is opened with ``O_NONBLOCK`` and checked again
with ``fstat`` (it may have been swapped in between), and only a regular file is
mapped. The mapping costs no memory until read.

A sparse file can claim gigabytes of tables it does not hold (a 4 KB file with a
1 GB hole of "section headers"): :attr:`Input.real_size` is the bytes the file
really stores, which the ELF reader checks claimed table sizes against before
building anything per entry.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat

from analyzer.errors import InputError

_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a FIFO, not a regular file"),
          (stat.S_ISCHR, "is a character device, not a regular file"),
          (stat.S_ISBLK, "is a block device, not a regular file"),
          (stat.S_ISSOCK, "is a socket, not a regular file"))
_MAX_EXTENTS = 4096      # data extents walked to measure a sparse file; the rest counts as data


class Unreadable(InputError):
    """The file cannot be read as input (kind of file, permissions, missing): ``reason`` says why."""

    def __init__(self, label: str, reason: str):
        super().__init__(f"{label}: {reason}")
        self.reason = reason


class Input:
    """A regular file's bytes (read-only map) and how many of them the file really stores.

    A plain class: a dataclass costs ~1 ms of sizediff's start-up to define.
    """
    __slots__ = ("data", "real_size")

    def __init__(self, data: memoryview, real_size: int):
        self.data, self.real_size = data, real_size


def _not_regular(mode: int) -> str:
    for test, what in _KINDS:
        if test(mode):
            return what
    return "is not a regular file"


def _os_reason(e: OSError) -> str:
    if e.errno == errno.ENOENT:
        return "no such file"
    if e.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.ENOTDIR:
        return "a path component is not a directory"
    if e.errno == errno.ENAMETOOLONG:
        return "file name too long"
    return f"cannot read it ({e.strerror or e})"


def _real_size(fd: int, st: os.stat_result) -> int:
    """Bytes the file stores: its size unless blocks say it has holes, then the data extents' sum."""
    size = st.st_size
    if getattr(st, "st_blocks", size) * 512 >= size or not hasattr(os, "SEEK_DATA"):
        return size
    total = pos = 0
    try:
        for _ in range(_MAX_EXTENTS):
            start = os.lseek(fd, pos, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
            total += end - start
            pos = end
            if pos >= size:
                return total
        return total + (size - pos)
    except OSError as e:
        if e.errno == errno.ENXIO:        # no data after pos: the rest is a hole
            return total
        return size                       # the filesystem cannot tell: trust the size


def open_input(path: str | os.PathLike, label: str | None = None) -> Input:
    """Map a regular file read-only; any other kind of file, or an unreadable one, is an InputError."""
    label = str(path) if label is None else label
    try:
        st = os.stat(path)
    except (OSError, ValueError) as e:    # ValueError: a NUL in the name
        raise Unreadable(label, _os_reason(e) if isinstance(e, OSError) else "invalid file name") from None
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable(label, _not_regular(st.st_mode))
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Unreadable(label, _os_reason(e)) from None
    try:
        st = os.fstat(fd)                 # what was opened, not what was looked at
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(label, _not_regular(st.st_mode))
        if st.st_size == 0:
            return Input(memoryview(b""), 0)
        try:
            data = memoryview(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
        except (OSError, ValueError) as e:
            raise Unreadable(label, f"cannot map it ({e})") from None
        return Input(data, _real_size(fd, st))
    finally:
        os.close(fd)


def read_input(path: str | os.PathLike, label: str | None = None) -> bytes:
    """The whole contents of a regular file, opened as :func:`open_input` opens it."""
    return bytes(open_input(path, label).data)


GUNZIP_FLOOR = 256 << 20   # a compiler's report of one object is tens of MB
GUNZIP_RATIO = 100         # text and JSON compress ~10-20x; a gzip bomb ~1000x


def gunzip(raw: bytes, label: str, limit: int | None = None) -> bytes:
    """gzip data decompressed in bounded steps: more than ``limit`` bytes (default: the larger
    of 256 MB and 100x the compressed size) is an InputError, not a machine out of memory."""
    import zlib
    limit = max(GUNZIP_FLOOR, GUNZIP_RATIO * len(raw)) if limit is None else limit
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = []
    total = 0
    data = raw
    try:
        while data:
            chunk = d.decompress(data, 1 << 24)
            total += len(chunk)
            if total > limit:
                raise InputError(f"{label}: gzip data decompresses to more than {limit >> 20} MB")
            out.append(chunk)
            data = d.unconsumed_tail
            if d.eof:
                rest = d.unused_data
                if rest.strip(b"\0"):                  # another gzip member follows
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    data = rest
        if not d.eof:
            raise InputError(f"{label}: corrupt gzip file (truncated)")
    except zlib.error as e:
        raise InputError(f"{label}: corrupt gzip file ({e})") from None
    return b"".join(out)

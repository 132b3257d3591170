"""Opening the rendered-page cache's sqlite file (``<db>.pages``) without ever following its name.

The file sits beside the store, in a directory others may write (issue 27). sqlite itself resolves
a symbolic link to the database and would create a dangling link's target: a link to the store made
a read-only server write its cache tables into the store, a dangling one made sqlite create the
target, and a garbage file left every worker rendering every request for its whole life. So:

- the name and sqlite's side files (``-wal``, ``-shm``) are looked at with ``lstat``; only when all
  are regular files (or absent, for the side files) is the cache opened: ``O_NOFOLLOW``, then sqlite
  with ``mode=rw`` (it creates nothing), then the name checked again to be that very file;
- anything else there (a link, a FIFO, a socket, a device node, a file sqlite calls damaged) is
  replaced: a new cache file is made aside (``O_EXCL``), set up, and renamed over the name, after
  removing the side files (a stale WAL would be replayed into the new file). Only the entry that
  was found is replaced: under an exclusive lock on the directory the name is looked at again, and
  when it is another file (another worker replaced it first) that one is opened instead. Removing a
  link never touches its target. A directory is refused (it is not ours to delete).
"""
from __future__ import annotations

import errno
import fcntl
import os
import secrets
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

SIDE_FILES = ("-wal", "-shm")
ATTEMPTS = 3            # the name changing under us this often is someone playing with it: refused


class Busy(Exception):
    """The file is being made or locked by another process right now: try again later."""


class Refused(Exception):
    """The cache cannot be used here (a directory at its name, a read-only directory...)."""


def identity(path: Path) -> tuple | None:
    """What is at ``path`` itself (never followed): (device, inode, type), or None when nothing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode)


def damaged(e: BaseException) -> bool:
    """sqlite says the file is not a database or is corrupt (not busy, locked, read-only...)."""
    return isinstance(e, sqlite3.DatabaseError) and getattr(e, "sqlite_errorname", "").startswith(
        ("SQLITE_NOTADB", "SQLITE_CORRUPT"))


def _what(kind: int | None) -> str:
    return {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
            stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFDIR: "a directory"}.get(kind, "not a file")


def connect(path: Path, setup: Callable[[sqlite3.Connection], None], suspect: tuple | None = None,
            timeout: float = 2.0, log: Callable[[str], None] | None = None) -> sqlite3.Connection:
    """A connection to the cache file at ``path``, set up by ``setup``; ``suspect``: the identity of
    a file a query found damaged (replaced even if it opens). Busy or Refused, else sqlite3.Error
    or OSError from sqlite or the directory."""
    for _ in range(ATTEMPTS):
        found = identity(path)
        sides = [identity(path.with_name(path.name + s)) for s in SIDE_FILES]
        odd = next((s for s in sides if s is not None and s[2] != stat.S_IFREG), None)
        why = None
        if found is not None and found[2] == stat.S_IFDIR:
            raise Refused(f"{path} is a directory")
        if found is None:
            why = ""                                    # first use: made without a word
        elif found[2] != stat.S_IFREG:
            why = f"{path} was {_what(found[2])} (not followed)"
        elif odd is not None:
            why = f"{path}'s side file was {_what(odd[2])} (not followed)"
        elif found == suspect:
            why = f"{path} was damaged"
        else:
            conn = _open(path, found, setup, timeout)
            if isinstance(conn, sqlite3.Connection):
                return conn
            if conn is None:
                continue                                # changed under us: look again
            why = f"{path} was damaged ({conn})"
        if _replace(path, found, setup, timeout):
            if why and log is not None:
                log(f"page cache {why}: replaced by a new file")
    raise Refused(f"{path} keeps changing")


def _open(path: Path, found: tuple, setup: Callable[[sqlite3.Connection], None],
          timeout: float) -> sqlite3.Connection | str | None:
    """The connection; a string: sqlite found the file damaged (why); None: the name changed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, OSError) as e:
        if isinstance(e, FileNotFoundError) or e.errno == errno.ELOOP:     # gone, or a link now
            return None
        raise
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode)) != found:
            return None
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=rw", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=timeout)
    finally:
        os.close(fd)
    try:
        if identity(path) != found:                     # sqlite opened the name after our check
            conn.close()
            return None
        setup(conn)
    except sqlite3.Error as e:
        conn.close()
        if damaged(e):
            return str(e)
        if "locked" in str(e) or "busy" in str(e):
            raise Busy(str(e)) from None
        raise
    return conn


def _replace(path: Path, found: tuple | None, setup: Callable[[sqlite3.Connection], None],
             timeout: float) -> bool:
    """A new cache file at ``path``, if what is there is still ``found`` (True: replaced)."""
    with _dir_lock(path.parent, timeout):
        if identity(path) != found:
            return False                                # another process replaced it first
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.new")
        try:
            os.close(os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
            conn = sqlite3.connect(f"file:{quote(str(tmp))}?mode=rw", uri=True, isolation_level=None,
                                   timeout=timeout)
            try:
                setup(conn)
            finally:
                conn.close()                            # checkpointed: tmp holds it all, its WAL is gone
            for s in SIDE_FILES:                        # a stale WAL would be replayed into the new file
                try:
                    os.unlink(path.with_name(path.name + s))
                except FileNotFoundError:
                    pass
            os.rename(tmp, path)                        # replaces a link or FIFO itself, never its target
        except BaseException:
            for p in (tmp, *(tmp.with_name(tmp.name + s) for s in SIDE_FILES)):
                try:
                    os.unlink(p)
                except OSError:
                    pass
            raise
    return True


@contextmanager
def _dir_lock(directory: Path, timeout: float) -> Iterator[None]:
    """An exclusive flock on the directory (no lock file of ours to plant a link at); Busy past
    ``timeout`` (anyone who can open the directory can hold it)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Busy(f"{directory} is locked") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)                                    # releases the lock

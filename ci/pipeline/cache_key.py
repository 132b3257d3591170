"""The secret that authenticates the per-unit inline-cost cache's entries (issue 27).

The sizewatch cache dir is shared: in compose the dashboard and the bot mount the same volume as
the workers, and anything that can write there could recompute a plain checksum. An entry is
therefore signed with HMAC-SHA256 under a key that is *not* in the cache:
``$XDG_CONFIG_HOME/sizewatch/unit-cache.key`` (``~/.config/sizewatch/unit-cache.key`` by default),
which the build sandbox masks like the rest of the home (``toolchains.sandbox.default_masks``).

The key is made on first use: 32 random bytes, as hex, written to a new file opened with
``O_EXCL`` and mode 0600, then published with a hard link (which never replaces a file), so two
first uses at once end up with the one key that was linked first. It is read only when it is a
regular file (never through a symbolic link), owned by this user, that no group or other user can
read or write: a key others can read authenticates nothing, so anything else is refused in one line.

Why a key file rather than entries in the store: the store may be sqlite or PostgreSQL and is
written once per build in one transaction, while the cache is read per unit from build threads and
bounded by deleting files; in compose the dashboard holds the store's credentials too, whereas the
key can be given to the workers alone (a volume only they mount).
"""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from analyzer.errors import SizewatchError
from toolchains.source import cache_dir

KEY_NAME = "unit-cache.key"
KEY_BYTES = 32


def key_path() -> Path:
    """Where the key lives (outside the cache dir, see the module docstring)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sizewatch" / KEY_NAME


def unit_cache_key(path: Path | None = None) -> bytes:
    """The key, made on first use; SizewatchError (one line) for a key that cannot be trusted."""
    path = Path(path) if path is not None else key_path()
    cache = cache_dir().resolve()
    if path.parent.resolve() == cache or cache in path.parent.resolve().parents:
        raise SizewatchError(f"{path}: the unit cache's key must not be inside the cache dir {cache}")
    try:
        return _read(path)
    except FileNotFoundError:
        _create(path)
        return _read(path)


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as e:            # ELOOP: a symbolic link
        raise SizewatchError(f"{path}: the unit cache's key is not a regular file ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SizewatchError(f"{path}: the unit cache's key is not a regular file")
        if st.st_uid != os.geteuid():
            raise SizewatchError(f"{path}: the unit cache's key belongs to another user (uid {st.st_uid})")
        if st.st_mode & 0o077:
            raise SizewatchError(f"{path}: the unit cache's key is readable or writable by others "
                                 f"(mode {stat.S_IMODE(st.st_mode):04o}; chmod 600 it, or delete it for a new one)")
        raw = os.read(fd, 4 * KEY_BYTES)
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise SizewatchError(f"{path}: not a unit cache key ({KEY_BYTES} bytes as hex); delete it for a new one")
    return key


def _create(path: Path) -> None:
    """A new key, published only if no key is there yet (a hard link never replaces a file)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{KEY_NAME}.{secrets.token_hex(8)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise SizewatchError(f"{path}: cannot make the unit cache's key: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(KEY_BYTES) + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass                    # made meanwhile by another process: theirs is the key
    except OSError as e:
        raise SizewatchError(f"{path}: cannot make the unit cache's key: {e.strerror}") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass

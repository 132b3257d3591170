"""What the matrix is doing, live: one row per running build step (toolchain, commit, target,
how it is built, elapsed), and a one-line summary printed as each build finishes.

On a terminal this is a rich live table; otherwise (CI logs, pipes) only the summary lines.
"""
from __future__ import annotations

import threading
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from toolchains.results import CommitBuild, Event

_STYLE = {"ok": "green", "failed": "red", "timeout": "yellow", "killed": "yellow"}


class MatrixProgress:
    """Pass ``events`` and ``on_build`` to toolchains.parallel_builds.build_matrix inside ``with``."""

    def __init__(self, total_builds: int, console: Console | None = None, subjects: dict[str, str] | None = None):
        self.console = console or Console(stderr=True, highlight=False)
        self.total = total_builds
        self.finished = 0
        self.failed = 0
        self.subjects = subjects or {}
        self.running: dict[tuple[str, str, str], tuple[str, float]] = {}
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.live: Live | None = None

    def __enter__(self) -> "MatrixProgress":
        if self.console.is_terminal:
            self.live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def events(self, e: Event) -> None:
        key = (e.toolchain, e.sha, e.target)
        with self.lock:
            if e.kind == "start":
                self.running[key] = (e.detail, time.monotonic())
            elif e.kind == "done":
                self.running.pop(key, None)

    def on_build(self, b: CommitBuild) -> None:
        with self.lock:
            self.finished += 1
            self.failed += b.status != "ok"
        line = Text(b.summary())
        line.stylize(_STYLE.get(b.status, ""), 0, len(f"{b.toolchain:9} {b.sha[:12]}"))
        self.console.print(line, soft_wrap=True)

    def __rich__(self) -> Group:
        table = Table(box=None, pad_edge=False, show_edge=False)
        for col in ("toolchain", "commit", "target", "step", "elapsed"):
            table.add_column(col, justify="right" if col == "elapsed" else "left")
        now = time.monotonic()
        with self.lock:
            rows = sorted(self.running.items(), key=lambda kv: kv[1][1])
            head = (f"builds {self.finished}/{self.total} done, {self.failed} not ok, "
                    f"{now - self.t0:.0f} s")
        for (tc, sha, target), (step, start) in rows:
            subject = self.subjects.get(sha, "")
            table.add_row(tc, f"{sha[:12]} {subject[:40]}".rstrip(), target, step, f"{now - start:.1f} s")
        return Group(Text(head, style="bold"), table)

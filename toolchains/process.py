"""Running one build step under a time-out and a memory limit, killed as a whole when over.

Each step runs in its own session (process group) so a time-out kills make and every
compiler under it; under bubblewrap, killing bwrap tears down its pid namespace too.
The memory limit is RLIMIT_AS per process (``prlimit --as``): a compiler over it fails
with an out-of-memory error instead of pushing the machine into swap.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from toolchains.errors import InfrastructureError
from toolchains.sandbox import Sandbox

_live: set[subprocess.Popen] = set()
_live_lock = threading.Lock()

_OOM = re.compile(r"virtual memory exhausted|out of memory|Cannot allocate memory|std::bad_alloc|"
                  r"Killed signal terminated program|LLVM ERROR: out of memory|memory exhausted|"
                  r"failed to map segment from shared object|cannot map zero-fill pages")

# The wrappers' own failures (before the step ran) and a full disk: the machine's fault, not the
# commit's. prlimit and bwrap prefix their messages with their name at the start of a line, which
# no compiler diagnostic does (those start with a file name).
_INFRA = re.compile(r"^(?:prlimit|bwrap): .*$|^.*(?:No space left on device|Disk quota exceeded).*$", re.M)


def infrastructure_failure(stderr: str) -> str | None:
    """The line saying why the step could not run on this machine, if it says so."""
    m = _INFRA.search(stderr)
    return " ".join(m.group(0).split())[:300] if m else None


@dataclass
class Outcome:
    status: str              # ok | failed | timeout | killed (over the memory limit, or a signal)
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass(frozen=True)
class Limits:
    timeout: float | None = 900.0        # seconds for the whole build of one commit
    memory: int | None = 4 << 30         # bytes of address space per process


def run(argv: list[str], cwd: Path, sandbox: Sandbox, limits: Limits, deadline: float | None = None,
        stdin: str | None = None) -> Outcome:
    """Run ``argv`` in ``cwd`` inside ``sandbox``; ``deadline`` (time.monotonic) caps the time-out."""
    if limits.memory:
        argv = ["prlimit", f"--as={limits.memory}", "--", *argv]
    full = sandbox.wrap(argv, cwd)
    timeout = limits.timeout
    if deadline is not None:
        left = deadline - time.monotonic()
        timeout = left if timeout is None else min(timeout, left)
        if timeout <= 0:
            return Outcome("timeout", -signal.SIGKILL, "", "time-out reached before the step started\n", 0.0)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(full, cwd=cwd, env=sandbox.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                start_new_session=True, text=True, errors="replace")
    except OSError as e:                   # prlimit or bwrap missing, no processes left, cwd gone
        raise InfrastructureError(f"cannot start {full[0]}: {e.strerror or e}") from None
    with _live_lock:
        _live.add(proc)
    try:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            out, err = proc.communicate()
            return Outcome("timeout", proc.returncode, out, err + f"\ntimed out after {timeout:.0f} s\n",
                           time.monotonic() - t0)
        except BaseException:              # Ctrl-C and friends: the step has a session of its own
            _kill(proc)
            proc.wait()
            raise
    finally:
        with _live_lock:
            _live.discard(proc)
    secs = time.monotonic() - t0
    rc = proc.returncode
    if rc == 0:
        return Outcome("ok", rc, out, err, secs)
    infra = infrastructure_failure(err)
    if infra:
        raise InfrastructureError(f"the build could not run on this machine: {infra}")
    if _OOM.search(err) and limits.memory:
        err += f"\nover the memory limit ({limits.memory >> 20} MiB of address space per process)\n"
        return Outcome("killed", rc, out, err, secs)
    if rc < 0 or _OOM.search(err):
        return Outcome("killed", rc, out, err, secs)
    return Outcome("failed", rc, out, err, secs)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_all() -> None:
    """Kill every step still running (on Ctrl-C: the steps run in sessions of their own)."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        _kill(p)

"""The lines worth showing from a failed build: the compiler's own errors, else make's."""
from __future__ import annotations

import re

_LOC_ERROR = r"^\S+:\d+(?::\d+)?: (?:fatal )?error: |^(?:gcc|clang|cc1)\S*: (?:fatal )?error: "
# the linker's: GNU ld ("undefined reference to `f'", "multiple definition of"), ld.lld ("error: ...")
_LINK_ERROR = r"undefined reference to |multiple definition of |undefined symbol: |^ld(?:\.\w+)?(?:-\d+)?: error: "


def from_compiler(stderr: str) -> bool:
    """Whether the compiler itself reported errors: a result worth keeping (the same commit fails
    the same way again), unlike a set-up problem."""
    return any(re.search(_LOC_ERROR, ln) for ln in stderr.splitlines())


def compiler_errors(stderr: str, status: str = "failed", limit: int = 20) -> list[str]:
    """The compiler's error lines (``file:line:col: error: ...``), else the linker's (a vmlinux
    that does not link), else make's own error lines, else the last lines it printed."""
    lines = [ln.rstrip() for ln in stderr.splitlines()]
    got = [ln for ln in lines if re.search(_LOC_ERROR, ln)]
    if not got:
        got = [ln for ln in lines if re.search(_LINK_ERROR, ln)]
    if not got:
        got = [ln for ln in lines if "error" in ln.lower() or "memory" in ln.lower() or "failed to map" in ln]
    if not got:
        got = [ln for ln in lines if ln.strip()][-3:]
    if status == "timeout":
        got = [ln for ln in lines if ln.startswith("timed out after")] + got
    if status == "killed":
        got = [ln for ln in lines if ln.startswith("over the memory limit")] + \
              [ln for ln in got if not ln.startswith("over the memory limit")]
    return got[:limit]

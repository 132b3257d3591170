"""The fast path for single objects: replay kbuild's own command instead of running make.

``make mm/page_alloc.o`` costs 5-7 s here of which ~3 s is the compiler; the rest is make
walking the tree and clang's cc-option probes. When between the commit the build dir's
record of an object was written at and the commit to build only the object's own source
changed, the compile command in ``mm/.page_alloc.o.cmd`` is still exactly what kbuild would
run, so it is run directly (compile ``;`` objtool, as kbuild runs it), followed by what
kbuild's ``rule_cc_o_c`` does after it (fixdep rewrites the record, check-local-export).
Anything else falls back to make: a header, Makefile, Kconfig or script change, a config
that post-processes objects (MODVERSIONS, recordmcount), or no record yet.
When nothing the object reads changed at all, nothing is compiled: the earlier result is
the same bytes (builds here are reproducible).
"""
from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toolchains.cmdfile import CmdFile, cmdfile_path

# Files whose change can alter the build dir's shared state (config, generated headers,
# objtool, fixdep) or any object's command line: never replayed across.
BUILD_INPUT = re.compile(
    r"(^|/)(Makefile[^/]*|Kbuild[^/]*|Kconfig[^/]*|[^/]*\.mk)$"
    r"|^(scripts|tools|usr|include)/|^arch/[^/]+/(include|tools|configs|entry/syscalls)/"
    r"|^arch/[^/]+/kernel/asm-offsets[^/]*\.c$|^kernel/bounds\.c$|^kernel/configs/"
    r"|\.(h|tbl|lds|lds\.S)$")

# Config options under which kbuild rewrites an object after compiling it (symbol CRCs,
# mcount tables, ksym trimming): replaying only compile ; objtool would not match.
UNSAFE_CONFIG = ("CONFIG_MODVERSIONS=y", "CONFIG_FTRACE_MCOUNT_USE_RECORDMCOUNT=y", "CONFIG_TRIM_UNUSED_KSYMS=y")


@dataclass(frozen=True)
class Decision:
    method: str          # kbuild | replay | reused
    reason: str
    since: str | None = None     # the commit the object's record was written at


def changed_files(tree: Path, a: str, b: str) -> set[str] | None:
    """Paths that differ between two commits (both sides of renames), None when git cannot tell."""
    if a == b:
        return set()
    proc = subprocess.run(["git", "-C", str(tree), "diff", "--no-renames", "--name-only", a, b],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return {ln for ln in proc.stdout.splitlines() if ln}


def _why(path: str, deps: set[str]) -> str:
    if path in deps:
        return f"{path} changed (an input of the object)"
    if path.endswith(".h"):
        return f"{path} changed (a header)"
    return f"{path} changed (build system)"


def decide(tree: Path, sha: str, target: str, rec: CmdFile | None, srctree: Path, config_text: str,
           synced: str | None, built_at: str | None, mode: str = "auto") -> Decision:
    """How to build ``target`` at ``sha`` in a build dir whose state the stamps describe."""
    if mode == "kbuild":
        return Decision("kbuild", "make asked for")
    if rec is None or rec.source is None:
        return Decision("kbuild", f"no earlier build of {target} in this build dir")
    deps = rec.source_deps(srctree)
    if deps is None:
        return Decision("kbuild", f"{target}'s build record names another source tree")
    have = set(config_text.splitlines())
    unsafe = [c for c in UNSAFE_CONFIG if c in have]
    if unsafe:
        return Decision("kbuild", f"{unsafe[0]}: kbuild post-processes the object")
    if synced is None:
        return Decision("kbuild", "no clean make on record in this build dir")
    if built_at is None:
        return Decision("kbuild", f"no record of the commit {target} was last built at")
    source = rec.source[len(str(srctree).rstrip("/")) + 1:]
    changed = set()
    for base in {synced, built_at}:
        diff = changed_files(tree, base, sha)
        if diff is None:
            return Decision("kbuild", f"cannot diff {base[:12]}..{sha[:12]}")
        changed |= diff
    blockers = sorted(f for f in changed if f != source and (f in deps or BUILD_INPUT.search(f)))
    if blockers:
        return Decision("kbuild", _why(blockers[0], deps), built_at)
    if mode == "replay":
        return Decision("replay", "replay asked for", built_at)
    if source in changed:
        return Decision("replay", f"only {source} changed among its inputs", built_at)
    return Decision("reused", f"no input changed since {built_at[:12]}", built_at)


def script(rec: CmdFile, extra_flags: list[str], srctree: Path, nm: str) -> str:
    """The shell script that does what kbuild's ``rule_cc_o_c`` does for this object:
    compile (with ``extra_flags``) ; objtool, then fixdep rewrites the .cmd record (atomically),
    the objtool dependency line, and check-local-export. Runs in the build dir."""
    target = rec.target
    depfile = rec.depfile()
    compile_cmd = rec.compile_part + "".join(" " + shlex.quote(f) for f in extra_flags)
    post = rec.post_part
    record = cmdfile_path(Path("."), target)
    tmp_record = f"{record}.sizewatch-tmp"
    lines = ["set -e", f"rm -f {shlex.quote(target)}", compile_cmd + (f" ; {post}" if post else "")]
    if depfile:
        lines.append(f"scripts/basic/fixdep {shlex.quote(depfile)} {shlex.quote(target)} "
                     f"{shlex.quote(rec.command)} > {shlex.quote(tmp_record)}")
        lines.append(f"rm -f {shlex.quote(depfile)}")
        if rec.objtool_line:
            lines.append(f"{{ echo ; echo {shlex.quote(rec.objtool_line)} ; }} >> {shlex.quote(tmp_record)}")
    check = srctree / "scripts" / "check-local-export"
    if check.exists():
        lines.append(f"NM={shlex.quote(nm)} AWK=awk {shlex.quote(str(check))} {shlex.quote(target)}")
    if depfile:
        lines.append(f"mv -f {shlex.quote(tmp_record)} {shlex.quote(str(record))}")
    return "\n".join(lines) + "\n"


def report_script(rec: CmdFile, extra_flags: list[str], scratch: Path) -> str:
    """Compile only, into ``scratch``, with the report flags: the inline report for an object
    make has just built (its record was written by this very make, so the command is current)."""
    args = shlex.split(rec.compile_part)
    out = []
    for a in args:
        if a.startswith("-Wp,-MMD,"):
            a = f"-Wp,-MMD,{scratch}/dep.d"
        elif a == rec.target:
            a = f"{scratch}/report.o"
        out.append(shlex.quote(a))
    return "set -e\n" + " ".join(out) + "".join(" " + shlex.quote(f) for f in extra_flags) + "\n"

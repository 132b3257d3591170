"""kbuild's per-object record ``<builddir>/<dir>/.<obj>.cmd``: the exact command and the inputs.

kbuild writes it (through ``scripts/basic/fixdep``) after every successful compile:
``cmd_<obj> := <compile> ; <objtool ...>``, then ``source_<obj> :=`` and ``deps_<obj> :=``
(every header read, and ``$(wildcard include/config/X)`` for each config option the
sources test). That is all the fast path needs: the command to replay and the files
whose change makes a replay unsafe.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_WILDCARD = re.compile(r"^\$\(wildcard (\S+)\)$")


@dataclass(frozen=True)
class CmdFile:
    target: str                    # mm/page_alloc.o (relative to the build dir)
    command: str                   # as written in the file (make-escaped: $$ and $(pound))
    source: str | None             # absolute path of the .c file, None for non-compile rules
    deps: tuple[str, ...]          # every input file, as written (absolute, or build-dir relative)
    config_deps: tuple[str, ...]   # include/config/X entries
    objtool_line: str | None       # the trailing "<obj>: $(wildcard ./tools/objtool/objtool)" line

    @property
    def shell_command(self) -> str:
        """The command as the shell runs it (kbuild's make escaping undone)."""
        return self.command.replace("$(pound)", "#").replace("$$", "$")

    @property
    def compile_part(self) -> str:
        """The compiler invocation alone (before the first ``;``: objtool and friends follow)."""
        return split_command(self.shell_command)[0]

    @property
    def post_part(self) -> str:
        return split_command(self.shell_command)[1]

    def depfile(self) -> str | None:
        """Where ``-Wp,-MMD,<file>`` makes the compiler write its dependency list."""
        m = re.search(r"-Wp,-MMD,(\S+)", self.compile_part)
        return m.group(1) if m else None

    def source_deps(self, srctree: Path) -> set[str] | None:
        """Inputs inside ``srctree`` as repository-relative paths (None when the record names
        another source tree, e.g. a build dir copied from elsewhere: no replay then)."""
        root = str(srctree).rstrip("/") + "/"
        if self.source is None or not self.source.startswith(root):
            return None
        return {d[len(root):] for d in (self.source, *self.deps) if d.startswith(root)}


def split_command(cmd: str) -> tuple[str, str]:
    """``compile ; post`` split at the first top-level ``;`` (quotes respected)."""
    quote = None
    for i, ch in enumerate(cmd):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            return cmd[:i].strip(), cmd[i + 1:].strip()
    return cmd.strip(), ""


def cmdfile_path(build_dir: Path, target: str) -> Path:
    rel = Path(target)
    return build_dir / rel.parent / f".{rel.name}.cmd"


def parse(text: str, target: str) -> CmdFile:
    """Read a .cmd file's text (``target`` is the object it describes)."""
    command = ""
    source = None
    deps: list[str] = []
    config: list[str] = []
    in_deps = False
    objtool = None
    for line in text.splitlines():
        if line.startswith(f"cmd_{target} := ") or line.startswith(f"savedcmd_{target} := "):
            command = line.split(" := ", 1)[1]
            continue
        if line.startswith(f"source_{target} := "):
            source = line.split(" := ", 1)[1].strip()
            continue
        if line.startswith(f"deps_{target} := "):
            in_deps = True
            continue
        if in_deps:
            entry = line.strip().rstrip("\\").strip()
            if not entry:
                if not line.strip():
                    in_deps = False
                continue
            m = _WILDCARD.match(entry)
            if m:
                config.append(m.group(1))
            else:
                deps.append(entry)
            continue
        if line.startswith(f"{target}: $(wildcard") and "objtool" in line:
            objtool = line
    return CmdFile(target, command, source, tuple(deps), tuple(config), objtool)


def read(build_dir: Path, target: str) -> CmdFile | None:
    """The record for ``target`` in ``build_dir``, or None when kbuild has not built it there."""
    path = cmdfile_path(build_dir, target)
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    rec = parse(text, target)
    return rec if rec.command else None

"""The Debian dbg vmlinux the slow tests read, and what independent tools say about that file.

The image is whichever bench/dbg_vmlinux.py gives (the newest cached one, else the archive's
newest), so no test may carry a count, a name or an address of one Debian version: every expected
value is computed here from the file itself by llvm-dwarfdump-19, nm and objdump (pyelftools is
tests/inline_oracles.py's). The whole-file llvm-dwarfdump pass (about a minute) is kept per file
under the sizewatch cache (``oracles/dbg/``), keyed by the file's path, size and mtime and the
tool's version.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DWARFDUMP = "llvm-dwarfdump-19"


def dbg_image():
    """The dbg image (bench/dbg_vmlinux.Image: path, package, version); a failure, never a skip,
    when none can be had."""
    sys.path.insert(0, str(ROOT / "bench"))
    from dbg_vmlinux import Unavailable, image
    try:
        return image()
    except Unavailable as e:
        pytest.fail(str(e))


def _cache_file(path: Path, tool: str) -> Path:
    from toolchains.source import cache_dir
    st = path.stat()
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{version}".encode()).hexdigest()[:20]
    return cache_dir() / "oracles" / "dbg" / f"{path.parent.name}-{key}.json"


@dataclass
class DwarfdumpSummary:
    """What ``llvm-dwarfdump-19 --debug-info`` prints for a whole file."""
    units: list[tuple[str, int]]          # per unit: its DW_AT_name, its DW_TAG_inlined_subroutine DIEs
    origins: dict[str, int]               # inlined DIEs per the name llvm-dwarfdump gives their abstract origin
    first_origin: dict[str, int]          # name -> the offset of one origin DIE of that name
    unnamed: int                          # inlined DIEs whose origin has no name (or no origin)

    @property
    def instances(self) -> int:
        return sum(n for _name, n in self.units)


_ORIGIN = re.compile(rb'DW_AT_abstract_origin\s+\((0x[0-9a-f]+)(?: "(.*)")?\)')
_NAME = re.compile(rb'DW_AT_name\s+\("(.*)"\)')


@functools.lru_cache(maxsize=4)
def dwarfdump_summary(path: Path) -> DwarfdumpSummary:
    """One pass over llvm-dwarfdump-19's text of the whole .debug_info (cached per file)."""
    cache = _cache_file(path, DWARFDUMP)
    if cache.is_file():
        d = json.loads(cache.read_text())
        return DwarfdumpSummary([tuple(u) for u in d["units"]], d["origins"], d["first_origin"], d["unnamed"])
    units: list[list] = []
    origins: Counter = Counter()
    first: dict[str, int] = {}
    unnamed = 0
    pending = want_name = False
    dump = subprocess.Popen([DWARFDUMP, "--debug-info", str(path)], stdout=subprocess.PIPE, bufsize=1 << 20)
    for line in dump.stdout:
        if line.startswith(b"0x"):                    # a unit header, a DIE or a NULL entry
            if pending:                               # an inlined DIE without an origin line
                unnamed += 1
                pending = False
            if b" Unit: " in line:
                units.append(["?", 0])
            elif b"DW_TAG_inlined_subroutine" in line:
                units[-1][1] += 1
                pending = True
            elif b"DW_TAG_compile_unit" in line or b"DW_TAG_partial_unit" in line:
                want_name = True
            continue
        if pending and b"DW_AT_abstract_origin" in line:
            m = _ORIGIN.search(line)
            if m and m.group(2):
                name = m.group(2).decode(errors="replace")
                origins[name] += 1
                first.setdefault(name, int(m.group(1), 16))
            else:
                unnamed += 1
            pending = False
        elif want_name and b"DW_AT_name" in line:
            m = _NAME.search(line)
            units[-1][0] = m.group(1).decode(errors="replace") if m else "?"
            want_name = False
    if pending:
        unnamed += 1
    assert dump.wait() == 0, f"{DWARFDUMP} failed on {path}"
    out = DwarfdumpSummary([(n, k) for n, k in units], dict(origins), first, unnamed)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"units": out.units, "origins": out.origins, "first_origin": out.first_origin,
                               "unnamed": out.unnamed}))
    tmp.rename(cache)
    return out


def dwarfdump_decl_file(path: Path, offset: int) -> str | None:
    """DW_AT_decl_file of the DIE at ``offset`` (following DW_AT_specification / abstract origin),
    as llvm-dwarfdump-19 prints it (an absolute path)."""
    for _ in range(4):
        text = subprocess.run([DWARFDUMP, f"--debug-info={offset:#x}", str(path)], capture_output=True, text=True,
                              check=True).stdout
        m = re.search(r'DW_AT_decl_file\s+\("(.*)"\)', text)
        if m:
            return m.group(1)
        m = re.search(r"DW_AT_(?:specification|abstract_origin)\s+\((0x[0-9a-f]+)", text)
        if not m:
            return None
        offset = int(m.group(1), 16)
    return None


@functools.lru_cache(maxsize=4)
def nm_functions(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Function symbols (nm's t/T/w/W with a size) by name: [(address, size)]."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    text = subprocess.run(["nm", "-S", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            out[parts[3]].append((int(parts[0], 16), int(parts[1], 16)))
    return dict(out)


_DIS_HEADER = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_DIS_BRANCH = re.compile(r"^\s*[0-9a-f]+:\s+(?:\w+ )?(call|j[a-z]+)\s+[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>\s*$")


def objdump_callers(path: Path, pieces: list[tuple[str, int, int]]) -> dict[str, Counter]:
    """Direct calls and jumps out of the given function symbols ((name, address, size)) of a
    linked image, as objdump -d disassembles them: called symbol -> Counter(calling symbol -> sites).
    A jump to a place in its own symbol is a branch, and one to a piece of its own function
    (``foo`` -> ``foo.cold``: the part before the first dot names the function) is too."""
    pieces = sorted(pieces, key=lambda p: p[1])
    spans: list[list[int]] = []
    for _n, a, s in pieces:                       # one objdump per run of nearby symbols
        if spans and a - spans[-1][1] < 1 << 16:
            spans[-1][1] = max(spans[-1][1], a + s)
        else:
            spans.append([a, a + s])
    wanted = {(n, a) for n, a, _s in pieces}
    out: dict[str, Counter] = defaultdict(Counter)
    for lo, hi in spans:
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo:#x}",
                               f"--stop-address={hi:#x}", str(path)], capture_output=True, text=True,
                              check=True).stdout
        caller = None
        for line in text.splitlines():
            h = _DIS_HEADER.match(line)
            if h:
                caller = h.group(2) if (h.group(2), int(h.group(1), 16)) in wanted else None
                continue
            m = _DIS_BRANCH.match(line)
            if not m or caller is None:
                continue
            insn, target = m.group(1), m.group(2)
            if insn != "call" and (target == caller or target.split(".")[0] == caller.split(".")[0]):
                continue
            out[target][caller] += 1
    return dict(out)

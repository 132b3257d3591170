"""Test-local helpers for the inline tests: objdump's view of the calls (the oracle the
analyzer's call resolution is checked against), kernel sources at a series commit, and
replaying kbuild's compile command with inline-report flags into a temp directory."""
from __future__ import annotations

import functools
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path

_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(\w+)\s+([0-9a-f]+) <([^>+]+)(\+0x[0-9a-f]+)?>")
_RELOC = re.compile(r"^\s*([0-9a-f]+): (R_X86_64_\w+)\s+(\S+)")
_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_SECTION = re.compile(r"^Disassembly of section (\S+):$")


A64_OBJDUMP = "aarch64-linux-gnu-objdump"
_INSN_A64 = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]{8}\s+(\S+)\s+(?:\S+, )*([0-9a-f]+) <([^>+]+)(\+0x[0-9a-f]+)?>")
_RELOC_A64 = re.compile(r"^\s*([0-9a-f]+): (R_AARCH64_\w+)\s+(\S+)")


def objdump_symbols(obj: Path, objdump: str = "objdump") -> dict[str, list[tuple[int, int, str]]]:
    """Function symbols per section from ``objdump -t``: (value, size, name)."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    for line in subprocess.run([objdump, "-t", str(obj)], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"^([0-9a-f]+) (.{7}) (\S+)\s+([0-9a-f]+) (\S+)$", line)
        if m and "F" in m.group(2):
            out.setdefault(m.group(3), []).append((int(m.group(1), 16), int(m.group(4), 16), m.group(5)))
    return out


def objdump_calls(obj: Path, insns: tuple[str, ...] = ("call",)) -> Counter:
    """(calling symbol, called symbol) -> number of direct ``call`` instructions, per ``objdump -dr``.

    ``insns=("call", "jmp")`` also counts tail jumps to another function's start (the analyzer
    counts those as calls too). Only code inside function symbols counts (like the analyzer): e.g. the kernel's
    ``.altinstr_replacement`` snippets have no function symbol of their own.
    """
    syms = objdump_symbols(obj)
    funcs = {n for lst in syms.values() for _v, _s, n in lst}
    text = subprocess.run(["objdump", "-dr", str(obj)], capture_output=True, text=True, check=True).stdout
    lines = text.splitlines()
    counts: Counter = Counter()
    caller = None
    for i, line in enumerate(lines):
        if _SECTION.match(line):
            caller = None
            continue
        h = _HEADER.match(line)
        if h:
            caller = h.group(1)
            continue
        m = _INSN.match(line)
        if not m or m.group(2) not in insns or caller is None:
            continue
        addr = int(m.group(1), 16)
        target = m.group(4) if not m.group(5) else None
        if i + 1 < len(lines):
            r = _RELOC.match(lines[i + 1])
            if r and int(r.group(1), 16) == addr + 1 and r.group(2) in ("R_X86_64_PLT32", "R_X86_64_PC32"):
                sym = r.group(3)
                sm = re.match(r"^(.*?)([+-]0x[0-9a-f]+)?$", sym)
                name, add = sm.group(1), int(sm.group(2) or "0", 16)
                if name in syms:   # a section symbol + addend: the function at addend + 4
                    off = add + 4
                    target = next((n for v, s, n in syms[name] if v <= off < v + s), None)
                else:
                    target = name
        if m.group(2) != "call" and (target == caller or m.group(5)):
            continue            # a jump inside the function, not a tail call
        if target and caller in funcs:
            counts[(caller, target)] += 1
    return counts


def objdump_calls_a64(obj: Path, insns: tuple[str, ...] = ("bl",)) -> Counter:
    """The AArch64 twin of :func:`objdump_calls`, from binutils' ``aarch64-linux-gnu-objdump -dr``:
    (calling symbol, called symbol) -> number of direct ``bl`` instructions; ``insns=("bl", "b")``
    also counts ``b`` to another function (tail calls). The called symbol is the
    ``R_AARCH64_CALL26``/``JUMP26`` relocation at the instruction (a section symbol plus addend:
    the function at the addend), else objdump's ``<name>`` of the resolved immediate."""
    syms = objdump_symbols(obj, A64_OBJDUMP)
    funcs = {n for lst in syms.values() for _v, _s, n in lst}
    text = subprocess.run([A64_OBJDUMP, "-dr", str(obj)], capture_output=True, text=True, check=True).stdout
    lines = text.splitlines()
    counts: Counter = Counter()
    caller = None
    for i, line in enumerate(lines):
        if _SECTION.match(line):
            caller = None
            continue
        h = _HEADER.match(line)
        if h:
            caller = h.group(1)
            continue
        m = _INSN_A64.match(line)
        if not m or m.group(2) not in insns or caller is None:
            continue
        addr = int(m.group(1), 16)
        target = m.group(4) if not m.group(5) else None
        if i + 1 < len(lines):
            r = _RELOC_A64.match(lines[i + 1])
            if r and int(r.group(1), 16) == addr and r.group(2) in ("R_AARCH64_CALL26", "R_AARCH64_JUMP26"):
                sm = re.match(r"^(.*?)([+-]0x[0-9a-f]+)?$", r.group(3))
                name, add = sm.group(1), int(sm.group(2) or "0", 16)
                if name in syms:   # a section symbol + addend: the function at the addend
                    target = next((n for v, s, n in syms[name] if v <= add < v + s), None)
                else:
                    target = name
        if m.group(2) != "bl" and (target == caller or m.group(5)):
            continue            # a branch inside the function, not a tail call
        if target and caller in funcs:
            counts[(caller, target)] += 1
    return counts


def source_at(sha: str, dest: Path, files=("mm/page_alloc.c",)) -> Path:
    """A source root holding ``files`` as they are at ``sha`` in the cached linux-6.1 git tree."""
    from toolchains.source import ensure_source
    src = ensure_source("6.1").path
    for f in files:
        p = dest / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(subprocess.run(["git", "-C", str(src), "show", f"{sha}:{f}"], capture_output=True,
                                     check=True).stdout)
    return dest


def replay_with_flags(toolchain: str, sha: str, flags: list[str], out: Path) -> Path:
    """Re-run kbuild's compile of mm/page_alloc.c (from <builddir>/mm/.page_alloc.o.cmd) for the
    source at ``sha`` with extra flags; output, dependency file and source copy go to ``out``."""
    from toolchains.kbuild import Config
    from toolchains.locks import file_lock
    from toolchains.source import cache_dir
    build = cache_dir() / "build" / f"{toolchain}-{Config().key}"
    cmdline = (build / "mm" / ".page_alloc.o.cmd").read_text().splitlines()[0]
    compile_cmd = cmdline.split(":=", 1)[1].split(";")[0]
    args = shlex.split(compile_cmd)
    srcroot = source_at(sha, out / "src")
    obj = out / "page_alloc.o"
    new = []
    for a in args:
        if a.startswith("-Wp,-MMD,"):
            a = f"-Wp,-MMD,{out}/page_alloc.o.d"
        elif a == "mm/page_alloc.o":
            a = str(obj)
        elif a.endswith("/mm/page_alloc.c"):
            a = str(srcroot / "mm" / "page_alloc.c")
        new.append(a)
    with file_lock(build.parent / f".{build.name}.lock"):
        subprocess.run([*new, *flags], cwd=build, check=True, capture_output=True)
    return obj


@functools.lru_cache(maxsize=16)       # the kernel tests ask about one object several times (5 s each)
def dwarf_inlines(obj: Path, cu_suffix: str | None = None) -> dict[str, Counter]:
    """Inlined copies per source function, by the function they sit in, as pyelftools reads them
    from the object with its *own* relocation of the debug sections (none of the analyzer's code):
    name -> Counter(enclosing subprogram's name -> DW_TAG_inlined_subroutine count).
    A linked image's sections are already relocated (--emit-relocs leaves the relocations in: they
    must not be applied twice); ``cu_suffix`` keeps only the units whose name ends so."""
    from elftools.elf.elffile import ELFFile

    def origin_name(die):
        seen = 0
        while die is not None and seen < 8:
            if "DW_AT_name" in die.attributes:
                return die.attributes["DW_AT_name"].value.decode()
            for ref in ("DW_AT_abstract_origin", "DW_AT_specification"):
                if ref in die.attributes:
                    die = die.get_DIE_from_attribute(ref)
                    break
            else:
                return None
            seen += 1
        return None

    out: dict[str, Counter] = {}
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        dwarf = elf.get_dwarf_info(relocate_dwarf_sections=elf.header["e_type"] == "ET_REL")
        for cu in dwarf.iter_CUs():
            if cu_suffix and not cu.get_top_DIE().attributes["DW_AT_name"].value.decode().endswith(cu_suffix):
                continue
            def walk(die, sub):
                for child in die.iter_children():
                    if child.tag == "DW_TAG_subprogram":
                        walk(child, origin_name(child))
                        continue
                    if child.tag == "DW_TAG_inlined_subroutine":
                        name = origin_name(child)
                        if name:
                            out.setdefault(name, Counter())[sub or "?"] += 1
                    walk(child, sub)
            walk(cu.get_top_DIE(), None)
    return out

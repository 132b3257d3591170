"""What llvm-mca is fed for a likely path (toolchains.mca.mca_source) is exactly the instructions
``objdump -d`` shows at the path's addresses.

Oracle: each path's region is assembled by ``llvm-mc-19`` (LLVM's own x86 assembler: the parser
llvm-mca reads its input with) into an object, and GNU ``objdump -dr`` disassembles both that
object and the original one; the two listings, one line per path instruction, must be equal
after these normalisations (the whole list):

- a direct jump's or call's target becomes ``TARGET`` (llvm-mca is given one label for every
  target: it ignores where branches go);
- a ``jmp __x86_return_thunk`` (clang writes it with a ``cs`` prefix) reads ``ret``: the path
  returns there, and llvm-mca is fed ``retq``;
- ``xchg %ax,%ax`` (66 90, the 2-byte nop) reads ``nop``: capstone names it ``nop`` and llvm-mc
  assembles that as the 1-byte 90: the same no-op, one byte shorter in llvm-mca's input;
- a zero displacement ``0x0(...)`` reads ``(...)``: gcc's multi-byte nops carry a disp8 of 0,
  llvm-mc encodes the same operand without one;
- objdump's ``# address <symbol>`` comments on RIP-relative operands are dropped.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from analyzer.likely_path import hot_likely_paths
from analyzer.hotpaths import HotPaths
from conftest import FIXTURES
from toolchains.mca import mca_source

KERNEL_FLAGS = ("-fno-pic", "-fcf-protection=none", "-fno-stack-protector", "-mno-red-zone")
_SECTION = re.compile(r"^Disassembly of section (\S+):$")
# -w: "addr:\tmnemonic operands" and, on the same line after a tab, the relocation at it
_INSN = re.compile(r"^\s*([0-9a-f]+):\t([^\t]*?)\s*(?:\t\s*[0-9a-f]+: R_X86_64_\w+\t(\S+))?$")
_BRANCH = re.compile(r"^((?:\S+ )*?(?:j[a-z]+|call))\s+(?:0x)?[0-9a-f]+(?: <[^>]*>)?$")


def listing(path: Path) -> dict[str, dict[int, str]]:
    """``objdump -dr -w`` of a file: per section, address -> the instruction's normalised text."""
    out = subprocess.run(["objdump", "-dr", "-w", "--no-show-raw-insn", str(path)],
                         capture_output=True, text=True, check=True).stdout
    got: dict[str, dict[int, str]] = {}
    sec = ""
    for line in out.splitlines():
        if m := _SECTION.match(line):
            sec = m.group(1)
            got[sec] = {}
        elif m := _INSN.match(line):
            got[sec][int(m.group(1), 16)] = normalise(m.group(2), m.group(3) or "")
    return got


def normalise(text: str, reloc: str) -> str:
    """The module docstring's normalisations, nothing else."""
    text = " ".join(text.split("#")[0].split())
    if reloc.startswith("__x86_return_thunk") and "jmp" in text.split()[:2]:
        return "ret"
    text = _BRANCH.sub(r"\1 TARGET", text)
    text = text.replace("xchg %ax,%ax", "nop")
    return re.sub(r"(?<![0-9a-fx])0x0\(", "(", text)


def assembled(path, work: Path) -> list[str]:
    """The path's llvm-mca region assembled by llvm-mc-19, as objdump lists it."""
    src = work / f"{path.function}.s"
    # llvm-mca takes the label undefined; an assembler wants it defined (after the path: no instruction)
    src.write_text(mca_source([path]) + ".Lsizewatch_target:\n")
    obj = work / f"{path.function}.o"
    p = subprocess.run(["llvm-mc-19", "-triple=x86_64-unknown-linux-gnu", "-filetype=obj", "-o", str(obj), str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0, (path.function, p.stderr[:1000])
    return list(listing(obj)[".text"].values())


def check_mca_input(obj: Path, hot: HotPaths, work: Path) -> int:
    """Every hot function's llvm-mca input against objdump on ``obj``; returns the instructions checked."""
    original = listing(obj)
    paths = hot_likely_paths(str(obj), hot)
    assert paths
    n = 0
    for p in paths:
        want = [original[p.section][i.address] for i in p.instructions]
        assert assembled(p, work) == want, p.function
        n += len(want)
    return n


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
def test_fixture_paths_feed_llvm_mca_objdumps_instructions(compile_c, tmp_path, cc):
    obj = compile_c(cc, FIXTURES / "likely_path.c", *KERNEL_FLAGS, name=f"likely-{cc}.o")
    assert check_mca_input(obj, HotPaths(["lp_*"]), tmp_path) > 10


@pytest.mark.kernel
@pytest.mark.parametrize("toolchain", ["gcc-12", "clang-19"])
def test_page_alloc_paths_feed_llvm_mca_objdumps_instructions(example_series, toolchain, tmp_path):
    """mm/page_alloc.o at each commit of the example series, every hot function's likely path."""
    for built in example_series(toolchain):
        assert check_mca_input(built.object_path, HotPaths(), tmp_path) > 500

"""The compilers' inline reports, collected in the object's own compile.

clang: ``-fsave-optimization-record -foptimization-record-passes=inline
-foptimization-record-file=F`` writes YAML remarks and leaves the object byte-identical.

gcc: ``-fopt-info-inline-all=F`` would do, but gcc records every code-generation option in
DW_AT_producer (``-grecord-gcc-switches`` is on by default), so the object's .debug_str
would then differ from kbuild's. The pass dumps ``-fdump-ipa-inline-optimized-missed=F``
and ``-fdump-tree-einline-optimized-missed=F`` are not recorded there: the object stays
byte-identical, and the dumps carry exactly the ``missed:``/``optimized:`` lines that
``-fopt-info-inline-all`` prints (checked on mm/page_alloc.c: the same 2,242 lines), among
the passes' other dump text. Those lines are kept, in -fopt-info's text format, which
analyzer.remarks reads.

ThinLTO (``--lto thin``): the units are compiled to bitcode and inlined again, across units, when
ld.lld links vmlinux.o. ld.lld writes that link's remarks itself (``--opt-remarks-filename F
--opt-remarks-passes inline``: one YAML file per ThinLTO backend task, ``F.thin.<N>.``, in clang's
format). kbuild links vmlinux.o with ``$(LD) $(KBUILD_LDFLAGS) -r``; KBUILD_LDFLAGS is the
Makefile's own (a command-line value would replace it whole, dropping -import-instr-limit=5 and
-z noexecstack) and LDFLAGS_vmlinux reaches only the final link of the already native vmlinux.o,
so the flags go into ``LD`` itself (:func:`lto_make_args`; a link without bitcode writes no file).
After the build the task file of the allocator's unit is kept as the vmlinux's report
(:func:`collect_lto`).
"""
from __future__ import annotations

import re
from pathlib import Path

_OPTINFO = re.compile(r"^(?:\S[^:]*:\d+:\d+: |<unknown>: )?(?:missed|optimized):\s")


def flags(family: str, scratch: Path) -> list[str]:
    """Extra compiler flags that write the inline report into ``scratch`` (a directory)."""
    if family == "gcc":
        return [f"-fdump-tree-einline-optimized-missed={scratch}/einline",
                f"-fdump-ipa-inline-optimized-missed={scratch}/ipa-inline"]
    if family == "clang":
        return ["-fsave-optimization-record", "-foptimization-record-passes=inline",
                f"-foptimization-record-file={scratch}/remarks.yaml"]
    return []


LTO_DIR = ".sizewatch-lto-remarks"      # in the build dir: ld.lld's remark files of the last link
LTO_UNIT = "mm/page_alloc.c"            # whose backend's remarks are kept (ci.pipeline.vmlinux.ALLOCATOR_CUS)


def lld(make_vars: dict[str, str]) -> str:
    """The ld.lld kbuild runs for these make variables (``LLVM=-19`` -> ``ld.lld-19``)."""
    if "LD" in make_vars:
        return make_vars["LD"]
    llvm = make_vars.get("LLVM", "1")
    if llvm.endswith("/"):
        return f"{llvm}ld.lld"
    return "ld.lld" + (llvm if llvm.startswith("-") else "")


def lto_make_args(make_vars: dict[str, str], build_dir: Path) -> list[str]:
    """``LD=...`` for a ThinLTO build: ld.lld writing its inline remarks under ``build_dir``."""
    return [f"LD={lld(make_vars)} --opt-remarks-filename {build_dir / LTO_DIR / 'ld.yaml'} "
            f"--opt-remarks-passes inline"]


def collect_lto(build_dir: Path, dest: Path, unit: str = LTO_UNIT) -> bool:
    """Write the remarks of the ThinLTO backend task that compiled ``unit`` (the task file naming it
    most often) to ``dest``; False when the link wrote none."""
    best, most = None, 0
    needle = unit.encode()
    for p in sorted((build_dir / LTO_DIR).glob("ld.yaml.thin.*")):
        try:
            n = p.read_bytes().count(needle)
        except OSError:
            continue
        if n > most:
            best, most = p, n
    if best is None:
        return False
    best.replace(dest)
    return True


def collect(family: str, scratch: Path, dest: Path) -> bool:
    """Write the report gathered in ``scratch`` to ``dest``; False when the compiler wrote none."""
    if family == "clang":
        src = scratch / "remarks.yaml"
        if not src.exists():
            return False
        src.replace(dest)
        return True
    if family == "gcc":
        parts = [scratch / "einline", scratch / "ipa-inline"]       # early inliner first, as -fopt-info
        if not any(p.exists() for p in parts):
            return False
        with dest.open("w") as out:
            for p in parts:
                if p.exists():
                    with p.open(errors="replace") as f:
                        out.writelines(line for line in f if _OPTINFO.match(line))
        return True
    return False

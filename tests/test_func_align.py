"""Function alignment read from the file (analyzer.func_align), per compiler and arch, checked
against the compiler's own ``-S`` directives and the layout ``nm -n -S`` prints: x86-64 pads
every function to 16 bytes, gcc-12 on arm64 to 16 with at most 11 bytes of padding, clang-19 on
arm64 not at all (4-byte instructions)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from analyzer.align import crossed, placement
from analyzer.func_align import FunctionAlign, from_asm, from_command
from analyzer.inlines import analyze

CROSS = "aarch64-linux-gnu-"
# name -> (compiler argv, arch, nm); the expected alignment is the one its -S output states
COMPILERS = {
    "gcc-12": (["gcc-12"], "x86_64", "nm"),
    "clang-19": (["clang-19"], "x86_64", "nm"),
    "gcc-12-aarch64": ([CROSS + "gcc-12"], "aarch64", CROSS + "nm"),
    "clang-19-aarch64": (["clang-19", "--target=aarch64-linux-gnu"], "aarch64", CROSS + "nm"),
}
WANT = {"gcc-12": (16, 15), "clang-19": (16, 15), "gcc-12-aarch64": (16, 11), "clang-19-aarch64": (4, 3)}


def many_functions(path: Path, n: int = 48) -> Path:
    """Functions of every size residue: f<k> does k read-modify-writes (12 bytes each on arm64)."""
    body = []
    for k in range(1, n + 1):
        stmts = " ".join(f"p[{i}] += {i + k};" for i in range(k))
        body.append(f"__attribute__((noinline)) int f{k}(int *p) {{ {stmts} return p[0] * {k}; }}")
    body.append("int all(int *p) { return " + " + ".join(f"f{k}(p)" for k in range(1, n + 1)) + "; }")
    path.write_text("\n".join(body) + "\n")
    return path


def nm_text(nm: str, obj: Path) -> list[tuple[int, int, str]]:
    """(address, size, name) of the sized text symbols, in ``nm -n`` order."""
    out = []
    for line in subprocess.run([nm, "-n", "-S", str(obj)], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT":
            out.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Per compiler: the object and the assembly of the same source, same flags."""
    d = tmp_path_factory.mktemp("falign")
    src = many_functions(d / "many.c")
    out = {}
    for name, (cc, arch, nm) in COMPILERS.items():
        obj, asm = d / f"{name}.o", d / f"{name}.s"
        for flag, dest in (("-c", obj), ("-S", asm)):
            subprocess.run([*cc, "-O2", flag, "-o", str(dest), str(src)], check=True)
        out[name] = (obj, asm.read_text(), arch, nm)
    return out


@pytest.mark.parametrize("name", list(COMPILERS))
def test_alignment_is_the_compilers_own(built, name):
    obj, asm, arch, _ = built[name]
    stated = {(a.unit, a.max_skip) for a in from_asm(asm, arch).values()}
    assert stated == {WANT[name]}, stated                 # what each compiler emits before every function
    got = analyze(obj).align
    assert (got.unit, got.max_skip, got.source) == (*WANT[name], "addresses")
    assert got.granule == (4 if arch == "aarch64" else 1)


@pytest.mark.parametrize("name", list(COMPILERS))
def test_padding_rule_is_the_layout_nm_prints(built, name):
    """Every function's padding (its next neighbour's start less its end) is what the read
    alignment says, pair by pair; gcc on arm64 leaves some functions unpadded (12 bytes needed)."""
    obj, _, arch, nm = built[name]
    fa = analyze(obj).align
    syms = nm_text(nm, obj)
    assert len(syms) == 49
    skipped = 0
    for (a, size, _), (b, _, _) in zip(syms, syms[1:]):
        assert b - (a + size) == fa.pad(a + size), (name, hex(a), size, hex(b))
        skipped += -(a + size) % fa.unit > fa.max_skip
    assert (skipped > 0) == (name == "gcc-12-aarch64"), skipped


@pytest.mark.parametrize("name", list(COMPILERS))
def test_function_sections_take_the_section_alignment(tmp_path, name):
    """One function a section: the linker pads each to its sh_addralign (readelf), skip limit or not."""
    cc, arch, _ = COMPILERS[name]
    obj = tmp_path / "fs.o"
    subprocess.run([*cc, "-O2", "-c", "-ffunction-sections", "-o", str(obj), str(many_functions(tmp_path / "m.c"))],
                   check=True)
    facts = analyze(obj)
    assert facts.placed and (facts.align.unit, facts.align.source) == (WANT[name][0], "section")
    out = subprocess.run([CROSS + "readelf" if arch == "aarch64" else "readelf", "-SW", str(obj)],
                         capture_output=True, text=True, check=True).stdout
    aligns = {ln.split("]", 1)[1].split()[0]: int(ln.split()[-1]) for ln in out.splitlines()
              if "] .text.f" in ln}
    for k in (1, 7, 48):
        p = facts.functions[f"f{k}"].placement
        assert p.align == aligns[f".text.f{k}"] and p.padded == -(-p.size // p.align) * p.align


def test_command_line_spelling():
    """gcc's documented -falign-functions=N[:M[:N2[:M2]]]: N with at most M-1 bytes of padding."""
    assert from_command(["gcc", "-O2", "-falign-functions=64", "-c"], 1) == FunctionAlign(64, 63, 1, "command")
    assert from_command(["-falign-functions=16:12", "x.c"], 4) == FunctionAlign(16, 11, 4, "command")
    assert from_command(["-falign-functions=32:8:16"], 1) == FunctionAlign(32, 7, 16, "command")
    assert from_command(["-falign-functions=64", "-fno-align-functions"], 4) == FunctionAlign(4, 3, 4, "command")
    assert from_command(["-O2", "-falign-loops=1"], 1) is None


def test_crossing_follows_the_padding_rule():
    """gcc arm64 (16, skip 11): 32 -> 36 bytes moves the next function by 4 (12 bytes of padding
    would be needed: none is inserted), 36 -> 40 by 12 more (padded to 48), 40 -> 48 not at all.
    clang arm64 (unit 4, no padding): no alignment boundary exists, only cache lines."""
    gcc = FunctionAlign(16, 11, 4, "addresses")
    pads = {s: placement(s, align=gcc).padded for s in (32, 36, 40, 44, 48)}
    assert pads == {32: 32, 36: 36, 40: 48, 44: 48, 48: 48}
    assert crossed(placement(32, align=gcc), placement(36, align=gcc)) == ["alignment"]
    assert crossed(placement(36, align=gcc), placement(40, align=gcc)) == ["alignment"]
    assert crossed(placement(40, align=gcc), placement(48, align=gcc)) == []
    assert placement(36, align=gcc).headroom == 0 and placement(40, align=gcc).headroom == 8
    clang = FunctionAlign(4, 3, 4, "addresses")
    assert crossed(placement(60, align=clang), placement(64, align=clang)) == []
    assert crossed(placement(64, align=clang), placement(68, align=clang)) == ["cache_line"]


@pytest.mark.parametrize("name", ["gcc-12-aarch64", "clang-19-aarch64"])
def test_sizediff_align_view_names_the_unit(tmp_path, name):
    """``sizediff --align`` on two arm64 objects: the unit on its first line, the columns in it,
    f20 grown by one statement (12 bytes) with its units and crossing in that unit."""
    import sys
    cc, arch, _ = COMPILERS[name]
    objs = []
    for v, extra in (("a", ""), ("b", "p[99] += 7; ")):
        src = many_functions(tmp_path / f"{v}.c")
        src.write_text(src.read_text().replace("int f20(int *p) { ", "int f20(int *p) { " + extra))
        objs.append(tmp_path / f"{v}.o")
        subprocess.run([*cc, "-O2", "-g", "-c", "-o", str(objs[-1]), str(src)], check=True)
    r = subprocess.run([sys.executable, "-m", "cli.sizediff", "--inlines", "--align", *map(str, objs)],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr
    fa = analyze(objs[1]).align
    head = {"gcc-12-aarch64": "16-byte function alignment, at most 11 bytes of padding (from addresses)",
            "clang-19-aarch64": "4-byte function alignment (from addresses): no padding, every byte of "
                                "growth moves what follows"}[name]
    assert fa.label() + (": no padding, every byte of growth moves what follows" if fa.padless else "") == head
    lines = r.stdout.splitlines()
    i = lines.index(head)
    assert f"{fa.unit}B units" in lines[i + 2]
    (row,) = [ln for ln in lines[i + 3:] if ln.split()[:1] == ["f20"]]
    old, new = (analyze(o).functions["f20"].size for o in objs)
    b, h = placement(old, align=fa), placement(new, align=fa)
    assert row.split()[1:5] == [str(old), str(new), f"+{new - old}", f"{b.blocks}->{h.blocks}"]
    assert row.split()[-1] == (",".join(crossed(b, h)) or "-")

"""sizediff against the real oracle: scripts/bloat-o-meter from Debian's linux-source tarballs,
run on the same files (objects built by real gcc and clang, archives made by real ar)."""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES

MODES = [(), ("-c",), ("-d",), ("-t",)]
CROSS_TARGETS = ["aarch64-linux-gnu", "powerpc64-linux-gnu", "i386-linux-gnu", "mips-linux-gnu",
                 "s390x-linux-gnu"]


def assert_same_as_oracle(sizediff, bloat_o_meter, old: Path, new: Path, *args: str) -> str:
    """Both oracle versions, byte for byte: 6.12 as-is, 6.1 behind --no-weak."""
    ours = sizediff(*args, old, new)
    ref = bloat_o_meter(*args, old, new, version="6.12")
    assert ref.returncode == 0, ref.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == ref.stdout
    ours61 = sizediff("--no-weak", *args, old, new)
    ref61 = bloat_o_meter(*args, old, new, version="6.1")
    assert ref61.returncode == 0, ref61.stderr
    assert ours61.returncode == 0, ours61.stderr
    assert ours61.stdout == ref61.stdout and ref61.stdout.startswith(b"add/remove: ")
    return ours.stdout.decode()


@pytest.fixture(scope="module")
def fixture_pairs(compile_c):
    """(name, base.o, head.o) compiled from tests/fixtures/symbols.c by real compilers."""
    pairs = []
    for cc in ("gcc-12", "clang-19"):
        pairs.append((cc, compile_c(cc, FIXTURES / "symbols.c", "-DV=1", name=f"sym-{cc}-1.o"),
                      compile_c(cc, FIXTURES / "symbols.c", "-DV=2", name=f"sym-{cc}-2.o")))
    return pairs


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "".join(m) or "default")
def test_fixtures_match_oracle(fixture_pairs, sizediff, bloat_o_meter, mode):
    for _name, old, new in fixture_pairs:
        assert_same_as_oracle(sizediff, bloat_o_meter, old, new, *mode)
        assert_same_as_oracle(sizediff, bloat_o_meter, new, old, *mode)


def test_fixtures_exercise_the_hard_cases(fixture_pairs, sizediff):
    """The fixture really has the shapes the comparison must handle (so the oracle test means something)."""
    _, old, new = fixture_pairs[0]          # gcc-12
    nm = subprocess.run(["nm", "--size-sort", old], capture_output=True, text=True).stdout
    for shape in ("calls.0", "calls.1", "split_me.cold", "scale.constprop.0", "sum_field.isra.0",
                  "work.part.0", " W weak_fn", " V weak_obj", " b local_bss", " r ro_local", " R ro_table"):
        assert shape in nm, shape
    out = sizediff(old, new).stdout.decode()
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[2:-1]}
    # the two function-local statics calls.0 and calls.1 are one "calls" row, unchanged here (the same
    # bytes in base and head, by nm): no row; also_counted, the function holding the second, grew
    calls = [sum(int(ln.split()[1], 16) for ln in subprocess.run(["nm", "-S", o], capture_output=True, text=True)
                  .stdout.splitlines() if ln.split()[-1].startswith("calls.")) for o in (old, new)]
    assert calls[0] == calls[1] > 0 and "calls" not in rows, (calls, out)
    assert int(rows["also_counted"][2]) > 0, out
    assert "linux_banner" not in out and "__mod_" not in out and "vermagic" not in out


def test_gcc_vs_clang(fixture_pairs, sizediff, bloat_o_meter):
    (_, g1, _), (_, c1, _) = fixture_pairs
    for mode in MODES:
        assert_same_as_oracle(sizediff, bloat_o_meter, g1, c1, *mode)


@pytest.mark.parametrize("target", CROSS_TARGETS)
def test_other_classes_and_endianness(compile_c, sizediff, bloat_o_meter, target):
    """32/64-bit, little/big-endian objects: the ELF is read directly, no cross nm needed."""
    old = compile_c("clang-19", FIXTURES / "symbols.c", f"--target={target}", "-DV=1", name=f"{target}-1.o")
    new = compile_c("clang-19", FIXTURES / "symbols.c", f"--target={target}", "-DV=2", name=f"{target}-2.o")
    assert_same_as_oracle(sizediff, bloat_o_meter, old, new)
    assert_same_as_oracle(sizediff, bloat_o_meter, old, new, "-c")


@pytest.mark.parametrize("thin", [False, True], ids=["ar", "thin-ar"])
def test_archives(compile_c, sizediff, bloat_o_meter, tmp_path, thin):
    """built-in.a style archives (kbuild makes thin ones): all members together."""
    archives = []
    for v in (1, 2):
        a = compile_c("gcc-12", FIXTURES / "symbols.c", f"-DV={v}", name=f"ar-sym-{v}.o")
        b = compile_c("gcc-12", FIXTURES / "archive_b.c", f"-DV={v}", name=f"ar-b-{v}.o")
        d = tmp_path / f"v{v}"
        d.mkdir()
        shutil.copy(a, d / "symbols.o")
        shutil.copy(b, d / "a_member_with_a_long_file_name.o")
        ar = d / "built-in.a"
        subprocess.run(["ar", "rcsT" if thin else "rcs", ar.name, "symbols.o",
                        "a_member_with_a_long_file_name.o"], cwd=d, check=True)
        archives.append(ar)
    for mode in MODES:
        assert_same_as_oracle(sizediff, bloat_o_meter, *archives, *mode)
    out = sizediff(*archives).stdout.decode()
    # local_bss of both members is summed under one name: 32*4 + 12*4 bytes before
    assert any(ln.split()[:2] == ["local_bss", "176"] for ln in out.splitlines()), out


def test_prefix_flag_is_accepted(fixture_pairs, sizediff, bloat_o_meter):
    _, old, new = fixture_pairs[0]
    ref = bloat_o_meter("-p", "x86_64-linux-gnu-", old, new)
    assert ref.returncode == 0
    assert sizediff("-p", "x86_64-linux-gnu-", old, new).stdout == ref.stdout
    assert sizediff("-p", "aarch64-linux-gnu-", old, new).stdout == ref.stdout  # no nm is run


# --- real kernel objects ---------------------------------------------------------------------

@pytest.mark.kernel
def test_page_alloc_series_gcc(example_series, sizediff, bloat_o_meter):
    stock, p1, p2 = (b.object_path for b in example_series("gcc-12"))
    for mode in MODES:
        for old, new in ((stock, p1), (p1, p2), (p2, stock)):
            assert_same_as_oracle(sizediff, bloat_o_meter, old, new, *mode)
    out = sizediff(p1, p2).stdout.decode()
    # the seed's shape: forcing __rmqueue_* inline grows get_page_from_freelist
    # and brings a helper out of line
    grow = [ln for ln in out.splitlines() if ln.startswith("get_page_from_freelist")]
    assert grow and int(grow[0].split()[-1]) > 1000
    assert any(ln.startswith("__rmqueue_smallest ") and ln.split()[2] == "-" for ln in out.splitlines())


@pytest.mark.kernel
def test_page_alloc_gcc_vs_clang(example_series, sizediff, bloat_o_meter):
    gcc = example_series("gcc-12")[0].object_path
    clang = example_series("clang-19")[0].object_path
    for mode in MODES:
        assert_same_as_oracle(sizediff, bloat_o_meter, gcc, clang, *mode)
    p1, p2 = (b.object_path for b in example_series("clang-19")[1:])
    assert_same_as_oracle(sizediff, bloat_o_meter, p1, p2)


# --- the views bloat-o-meter lacks, checked against the oracle's own numbers -------------------

def oracle_rows(text: str) -> list[tuple[str, str, str, int]]:
    rows = []
    for ln in text.splitlines():
        if ln.startswith(("add/remove", "Total:", "Function ", "Data ", "RO Data ")):
            continue
        name, old, new, delta = ln.split()
        rows.append((name, old, new, int(delta)))
    return rows


def test_json_csv_markdown_carry_the_oracle_rows(fixture_pairs, sizediff, bloat_o_meter):
    _, old, new = fixture_pairs[0]
    ref = oracle_rows(bloat_o_meter(old, new).stdout.decode())
    doc = json.loads(sizediff("--json", old, new).stdout)
    (table,) = doc["tables"]
    got = [(r["name"], "-" if r["old"] is None else str(r["old"]), "-" if r["new"] is None else str(r["new"]),
            r["delta"]) for r in table["rows"]]
    assert got == ref
    assert table["net"] == sum(r[3] for r in ref)
    rows = list(csv.DictReader(io.StringIO(sizediff("--csv", old, new).stdout.decode())))
    assert [(r["name"], int(r["delta"])) for r in rows if r["name"] != "TOTAL"] == [(r[0], r[3]) for r in ref]
    md = sizediff("--markdown", old, new).stdout.decode()
    assert md.count("\n| `") == len(ref)
    doc_c = json.loads(sizediff("--json", "-c", old, new).stdout)
    assert [t["title"] for t in doc_c["tables"]] == ["Function", "Data", "RO Data"]


def test_group_clones_reads_a_move(fixture_pairs, sizediff, bloat_o_meter):
    _, old, new = fixture_pairs[0]
    ref = bloat_o_meter(old, new).stdout.decode()
    assert "scale.constprop" in ref and "\nscale " in ref   # the oracle sees a remove and an add
    out = sizediff("--group-clones", old, new).stdout.decode().splitlines()
    i = next(i for i, ln in enumerate(out) if ln.split()[0] == "scale")
    members = [ln.split()[0] for ln in out[i + 1:i + 3]]
    assert sorted(members) == ["scale", "scale.constprop"]
    assert out[i].split()[-1] == "%+d" % (int(out[i + 1].split()[-1]) + int(out[i + 2].split()[-1]))


def test_sections_match_size(fixture_pairs, sizediff):
    """The text/data/bss split is what binutils size prints."""
    _, old, new = fixture_pairs[0]
    doc = json.loads(sizediff("--json", "--sections", old, new).stdout)
    for key, path in (("old", old), ("new", new)):
        line = subprocess.run(["size", path], capture_output=True, text=True).stdout.splitlines()[1]
        text, data, bss, dec = map(int, line.split()[:4])
        got = doc["sections"][key]
        assert (got["text"], got["data"], got["bss"]) == (text, data, bss)
        assert got["alloc"][".text"] > 0
    out = sizediff("--sections", old, new).stdout.decode()
    assert "\nsize " in out and "\n.text " in out


def test_split_cold(fixture_pairs, sizediff):
    _, old, new = fixture_pairs[0]
    doc = json.loads(sizediff("--json", "--split-cold", old, new).stdout)
    nm = subprocess.run(["nm", "--size-sort", old], capture_output=True, text=True).stdout.split("\n")
    cold = sum(int(ln.split()[0], 16) for ln in nm if ln.endswith(".cold") or ".cold." in ln)
    assert cold > 0 and doc["text_split"]["old"]["cold"] == cold
    text_syms = sum(int(ln.split()[0], 16) for ln in nm if ln and ln.split()[1] in "tTwW")
    assert doc["text_split"]["old"]["hot"] + cold == text_syms


def test_no_pfx(fixture_pairs, sizediff):
    _, old, new = fixture_pairs[0]
    assert "__cfi_fixture_hash" in sizediff(old, new).stdout.decode()
    assert "__cfi_fixture_hash" not in sizediff("--no-pfx", old, new).stdout.decode()


# --- bad input: one line, non-zero exit, no traceback ------------------------------------------

def bad_inputs(tmp: Path, good: Path) -> dict[str, Path]:
    data = good.read_bytes()
    cases = {"missing": tmp / "does-not-exist.o"}
    (tmp / "text.o").write_text("not an object\n")
    cases["not-elf"] = tmp / "text.o"
    (tmp / "empty.o").write_bytes(b"")
    cases["empty"] = tmp / "empty.o"
    for n in (10, 40, 200, len(data) // 2, len(data) - 10):
        p = tmp / f"trunc{n}.o"
        p.write_bytes(data[:n])
        cases[f"truncated-{n}"] = p
    corrupt = bytearray(data)
    corrupt[0x3A:0x3C] = b"\x07\x00"    # e_shentsize
    (tmp / "badhdr.o").write_bytes(bytes(corrupt))
    cases["corrupt-header"] = tmp / "badhdr.o"
    stripped = tmp / "stripped.o"
    subprocess.run(["strip", "--strip-all", "-o", stripped, good], check=True)
    cases["stripped"] = stripped
    ar_dir = tmp / "ar"
    ar_dir.mkdir()
    shutil.copy(good, ar_dir / "m.o")
    subprocess.run(["ar", "rcs", "lib.a", "m.o"], cwd=ar_dir, check=True)
    whole = (ar_dir / "lib.a").read_bytes()
    (tmp / "brokenmember.a").write_bytes(whole[:-300])
    cases["archive-broken-member"] = tmp / "brokenmember.a"
    cases["directory"] = tmp
    return cases


def test_bad_input_one_line_errors(fixture_pairs, sizediff, tmp_path):
    _, good, _ = fixture_pairs[0]
    for case, path in bad_inputs(tmp_path, good).items():
        for args in ((path, good), (good, path)):
            res = sizediff(*args)
            err = res.stderr.decode()
            assert res.returncode == 1, (case, res.returncode)       # the README: exit status 1
            assert res.stdout == b"", case
            assert "Traceback" not in err, (case, err)
            assert len(err.strip().splitlines()) == 1 and err.startswith("sizediff: "), (case, err)
        if case not in ("missing", "directory"):
            # binutils agrees these are not usable objects
            nm = subprocess.run(["nm", "--size-sort", path], capture_output=True, text=True)
            assert nm.returncode != 0 or nm.stderr.strip() or not nm.stdout.strip(), case


# --- the nm emulation itself ----------------------------------------------------------------------

def nm_size_sort(path: Path) -> list[tuple[int, str, str]]:
    out = subprocess.run(["nm", "--size-sort", path], capture_output=True, text=True, check=True).stdout
    rows = []
    for ln in out.splitlines():
        size, letter, name = ln.split(" ", 2)
        rows.append((int(size, 16), letter, name))
    return sorted(rows)


def ours_size_sort(path: Path) -> list[tuple[int, str, str]]:
    from analyzer.elf import load_images
    from analyzer.nm import size_sort
    return sorted((s.size, s.letter, s.name) for img in load_images(path) for s in size_sort(img))


def numpy_size_sort(path: Path) -> list[tuple[int, str, str]]:
    """The numpy column path (analyzer.nm.letters, used by the analyzer) on the same file."""
    import numpy as np
    from analyzer.elf import load_images, read_symtab
    from analyzer.nm import letters
    rows = []
    for img in load_images(path):
        table = read_symtab(img)
        keep, code = letters(table)
        idx = np.flatnonzero(keep)
        rows += zip(table.entries["size"][idx].tolist(), code[idx].tobytes().decode(), table.names(idx))
    return sorted(rows)


def test_listing_is_nm_size_sort(fixture_pairs, compile_c):
    """Both symbol readers list exactly what binutils nm --size-sort lists (size, letter, name)."""
    files = [p for _, a, b in fixture_pairs for p in (a, b)]
    files.append(compile_c("clang-19", FIXTURES / "symbols.c", "--target=aarch64-linux-gnu", "-DV=2",
                           name="aarch64-2.o"))
    for path in files:
        want = nm_size_sort(path)
        assert want and ours_size_sort(path) == want, path
        assert numpy_size_sort(path) == want, path


@pytest.mark.kernel
def test_listing_is_nm_size_sort_on_page_alloc(example_series):
    for built in example_series("gcc-12"):
        want = nm_size_sort(built.object_path)
        assert len(want) > 200
        assert ours_size_sort(built.object_path) == want
        assert numpy_size_sort(built.object_path) == want



def test_extended_section_indices(tmp_path, sizediff, bloat_o_meter):
    """Over 65280 sections: symbols' section indices come from SHT_SYMTAB_SHNDX, and those in
    the reserved range are plain sections (a function in section 0xfff1 is not absolute, one in
    0xfff2 not common). Assembled by real gas; nm and bloat-o-meter are the oracles."""
    objs = []
    for v in (1, 2):
        src, obj = tmp_path / f"many{v}.s", tmp_path / f"many{v}.o"
        src.write_text("".join(f'.section .text.f{i},"ax",@progbits\n.globl f{i}\n.type f{i},@function\n'
                               f'f{i}:\n.fill {1 + i * v % 5},1,0x90\n.size f{i},.-f{i}\n' for i in range(65540)))
        subprocess.run(["as", src, "-o", obj], check=True)
        objs.append(obj)
    assert "SYMTAB SECTION INDICES" in subprocess.run(["readelf", "-SW", objs[0]], capture_output=True,
                                                      text=True, check=True).stdout
    want = nm_size_sort(objs[0])
    assert ("T", "f65517") in {(letter, name) for _, letter, name in want}
    assert ours_size_sort(objs[0]) == want
    assert numpy_size_sort(objs[0]) == want
    assert_same_as_oracle(sizediff, bloat_o_meter, objs[0], objs[1])


# --- the command line ---------------------------------------------------------------------------

def test_plain_command_lines_read_as_click_reads_them():
    """bloat-o-meter's own command lines skip click's import (cli.sizediff.plain_args):
    each one it takes must mean what the click command makes of it; the rest go to click."""
    from cli.sizediff import plain_args
    from cli.sizediff_command import command
    taken = [["a.o", "b.o"], ["-c", "a.o", "b.o"], ["a.o", "-d", "b.o"], ["a.o", "b.o", "-t"],
             ["--no-weak", "a.o", "b.o"], ["-t", "--no-weak", "a.o", "b.o"], ["--no-weak", "--no-weak", "a", "b"],
             ["-p", "aarch64-linux-gnu-", "-c", "a.o", "b.o"], ["a.o", "b.o", "-p", "x"], ["-p", "x", "-p", "", "a", "b"],
             ["dir/a b.o", "dir/c.o"]]
    for args in taken:
        params = command.make_context("sizediff", list(args)).params
        want = (params["mode"] or "default", not params["no_weak"], params["file1"], params["file2"])
        assert plain_args(args) == want, args
    left_to_click = [[], ["a.o"], ["a", "b", "c"], ["-c", "-d", "a", "b"], ["-c", "-c", "a", "b"], ["-ct", "a", "b"],
                     ["-p"], ["a", "b", "-p"], ["-p", "-c", "a", "b"], ["-pfoo", "a", "b"], ["--json", "a", "b"],
                     ["--no-pfx", "a", "b"], ["-h"], ["--help"], ["--", "a", "b"], ["-", "b"], ["", "b"]]
    for args in left_to_click:
        assert plain_args(args) is None, args

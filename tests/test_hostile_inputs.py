"""Issue 12: every class of hostile ELF file, archive and special file the campaign found.

Each test crafts one file from a real object (a small C file built by gcc-12, or
the example series' mm/page_alloc.o) and runs the commands as a user would:
``sizediff GOOD BAD`` and ``sizewatch inspect BAD``. Where nm refuses or warns, each must
exit 1 with exactly one line on stderr naming the file and what is wrong: no traceback,
no hang (a timeout fails the test), no memory blow-up. Where ``nm --size-sort`` lists the
damaged file with exit 0 and nothing on stderr, sizediff must list the same symbols and
print bloat-o-meter's output.
"""
from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import sizediff_cmd, sizewatch_cmd
from elf_mutants import (RELA, SAMPLE_C, SHDR, SHT_RELA, SHT_SYMTAB, SYM, _of_type, _shdr_at, archive,
                         nm_listing, sections)

LIMIT = 20      # seconds: far more than any of these needs, far less than a hang


@pytest.fixture(scope="module")
def good(compile_c, tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("hostile") / "sample.c"
    src.write_text(SAMPLE_C)
    return compile_c("gcc-12", src, "-ffunction-sections", "-fdata-sections", name="hostile-sample.o")


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, timeout=LIMIT, stdin=subprocess.DEVNULL)


def refused(good: Path, bad: Path, reason: str, inspect: bool = True) -> None:
    """sizediff (and inspect) exit 1 with one line on stderr naming ``bad`` and ``reason``."""
    cmds = [[*sizediff_cmd(), str(good), str(bad)]]
    if inspect:
        cmds.append([*sizewatch_cmd(), "inspect", str(bad)])
    for cmd in cmds:
        p = run(cmd)
        err = p.stderr.decode(errors="replace")
        assert p.returncode == 1, (cmd, p.returncode, err)
        assert "Traceback" not in err and err.endswith("\n") and err.count("\n") == 1, err
        assert str(bad) in err and reason in err, err
        assert p.stdout == b""


def edited(good: Path, tmp_path: Path, edit) -> Path:
    buf = bytearray(good.read_bytes())
    edit(buf)
    out = tmp_path / "bad.o"
    out.write_bytes(bytes(buf))
    return out


def our_listing(path: Path) -> list:
    from analyzer.elf import load_images
    from analyzer.nm import size_sort
    return sorted((s.size, s.letter, s.name) for img in load_images(path) for s in size_sort(img))


def as_nm(good: Path, bad: Path, bloat_o_meter, inspect: bool = True) -> list:
    """nm --size-sort lists ``bad`` (exit 0, nothing on stderr): our listing is nm's, sizediff
    prints what bloat-o-meter prints, and inspect reads the file. Returns nm's listing."""
    nm = subprocess.run(["nm", "--size-sort", str(bad)], capture_output=True, timeout=LIMIT)
    assert nm.returncode == 0 and nm.stderr == b"", nm.stderr     # the premise: nm accepts it
    rc, rows, _rss, _s = nm_listing(bad)
    assert rc == 0 and rows is not None
    assert our_listing(bad) == rows
    p = run([*sizediff_cmd(), str(good), str(bad)])
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    bom = bloat_o_meter(good, bad)
    assert bom.returncode == 0 and bom.stderr == b"", bom.stderr
    assert p.stdout == bom.stdout
    if inspect:     # inspect reads more than symbols (it may refuse what it cannot join): never a traceback
        q = run([*sizewatch_cmd(), "inspect", str(bad)])
        err = q.stderr.decode(errors="replace")
        assert "Traceback" not in err and (q.returncode == 0 or (q.returncode == 1 and err.count("\n") == 1)), err
    return rows


def _symtab(data) -> tuple[int, tuple]:
    i = _of_type(bytes(data), SHT_SYMTAB)[0]
    return i, sections(bytes(data))[i]


def _shndx_victim(data) -> int:
    """A section the test may turn into something else (not the symbol or name tables)."""
    secs = sections(bytes(data))
    shstrndx, = struct.unpack_from("<H", data, 0x3E)
    sym, st = _symtab(data)
    targets = {s[7] for s in secs if s[1] in (SHT_RELA, 9)}     # patched by a relocation section
    return next(i for i, s in enumerate(secs) if i and i not in (sym, st[6], shstrndx, *targets) and s[1] != 8
                and s[5] >= 64)


def make_shndx(buf: bytearray, size: int, xindex: tuple[bytes, ...] = (), offset: int | None = None) -> None:
    """Turn a section into the symbol table's SHT_SYMTAB_SHNDX of ``size`` bytes (at ``offset``),
    and give the symbols named in ``xindex`` st_shndx SHN_XINDEX."""
    sym, st = _symtab(buf)
    off = _shdr_at(bytes(buf), _shndx_victim(buf))
    struct.pack_into("<I", buf, off + 4, 18)              # SHT_SYMTAB_SHNDX
    if offset is not None:
        struct.pack_into("<Q", buf, off + 24, offset)
    struct.pack_into("<Q", buf, off + 32, size)
    struct.pack_into("<I", buf, off + 40, sym)
    names = bytes(buf[sections(bytes(buf))[st[6]][4]:])
    for k in range(st[5] // SYM.size):
        at = st[4] + k * SYM.size
        if names[struct.unpack_from("<I", buf, at)[0]:].split(b"\0", 1)[0] in xindex:
            struct.pack_into("<H", buf, at + 6, 0xFFFF)


XINDEXED = (b"big", b"table", b"api")


@pytest.mark.parametrize("size", [6, 4, 0, 99, 2], ids=["not-multiple-of-4", "shorter-than-symtab", "empty",
                                                      "one-short", "two"])
@pytest.mark.parametrize("xindex", [(), XINDEXED], ids=["plain", "xindex-symbols"])
def test_symtab_shndx_size(good, tmp_path, size, xindex, bloat_o_meter):
    """binutils reads 4 bytes per symbol from the SHT_SYMTAB_SHNDX's offset whatever its size says;
    an empty one is no table (an SHN_XINDEX symbol then makes nm fail: refused)."""
    bad = edited(good, tmp_path, lambda b: make_shndx(b, size, xindex))
    if size == 0 and xindex:
        refused(good, bad, "SHT_SYMTAB_SHNDX section, and there is none")
    else:
        as_nm(good, bad, bloat_o_meter)


def test_symtab_shndx_patched_by_relocations(good, tmp_path):
    """A relocation section patching the section made SHT_SYMTAB_SHNDX: bfd makes no section of
    it, so the relocations have no target (nm: "file format not recognized"): refused."""
    def edit(buf):
        make_shndx(buf, 8)
        xsec = _of_type(bytes(buf), 18)[0]
        rela = _of_type(bytes(buf), SHT_RELA)[0]
        struct.pack_into("<I", buf, _shdr_at(bytes(buf), rela) + 44, xsec)
    bad = edited(good, tmp_path, edit)
    refused(good, bad, "corrupt relocation section", inspect=False)     # inspect reads no symbol letters


def test_symtab_shndx_past_file(good, tmp_path):
    """Read from its offset, the table runs past the end of the file: nm fails ("no symbols")."""
    n = good.stat().st_size
    bad = edited(good, tmp_path, lambda b: make_shndx(b, 4, offset=n - 8))
    refused(good, bad, "extended section index table")


@pytest.mark.parametrize("part", ["last", "all"])
def test_symbol_string_table_without_nul(good, tmp_path, part, bloat_o_meter):
    """binutils rejects the whole table, silently: nm lists every symbol as "(null)"."""
    def edit(buf):
        s = sections(bytes(buf))[_symtab(buf)[1][6]]
        for p in range(s[4] if part == "all" else s[4] + s[5] - 1, s[4] + s[5]):
            if buf[p] == 0:
                buf[p] = ord("A")
    bad = edited(good, tmp_path, edit)
    rows = as_nm(good, bad, bloat_o_meter)
    assert rows and {name for _, _, name in rows} == {"(null)"}
    from analyzer.elf import load_images, read_symtab    # inspect's reader names them the same way
    table = read_symtab(load_images(bad)[0])
    assert set(table.all_names()) == {"", "(null)"} and table.all_names()[0] == ""


def test_symbol_string_table_without_nul_offsets(good, tmp_path):
    """In the rejected table, name offset 0 is "" (bfd answers it without the table) and an offset
    past the table "(null)" like any other (not "invalid string offset" as in a sound table).
    bloat-o-meter cannot read nm's line for an empty name (it raises): the listing is compared."""
    def edit(buf):
        sym, st = _symtab(buf)
        s = sections(bytes(buf))[st[6]]
        names = bytes(buf[s[4]:s[4] + s[5]])
        for k in range(st[5] // SYM.size):
            at = st[4] + k * SYM.size
            name = names[struct.unpack_from("<I", buf, at)[0]:].split(b"\0", 1)[0]
            if name in (b"big", b"api"):
                struct.pack_into("<I", buf, at, 0 if name == b"big" else s[5] + 50)
        buf[s[4] + s[5] - 1] = ord("A")
    bad = edited(good, tmp_path, edit)
    nm = subprocess.run(["nm", "--size-sort", str(bad)], capture_output=True, timeout=LIMIT)
    assert nm.returncode == 0 and nm.stderr == b""
    rc, rows, _rss, _s = nm_listing(bad)
    assert our_listing(bad) == rows and sorted(name for _, _, name in rows).count("") == 1


def test_section_name_table_without_nul(good, tmp_path):
    """nm: "file format not recognized" (exit 1): refused."""
    def edit(buf):
        s = sections(bytes(buf))[struct.unpack_from("<H", buf, 0x3E)[0]]
        buf[s[4] + s[5] - 1] = ord("A")
    bad = edited(good, tmp_path, edit)
    refused(good, bad, "does not end with NUL")


def _debug_rela(buf) -> tuple:
    """The relocation section patching .debug_info (read by inspect's DWARF walk)."""
    secs = sections(bytes(buf))
    shstr = secs[struct.unpack_from("<H", buf, 0x3E)[0]]
    for i in _of_type(bytes(buf), SHT_RELA):
        s = secs[i]
        name = bytes(buf[shstr[4] + s[0]:]).split(b"\0", 1)[0]
        if name == b".rela.debug_info":
            return s
    raise AssertionError("no .rela.debug_info")


@pytest.mark.parametrize("offset", [1 << 63, (1 << 64) - 1], ids=["2**63", "2**64-1"])
def test_relocation_offset_past_2_63(good, tmp_path, offset):
    def edit(buf):
        s = _debug_rela(buf)
        struct.pack_into("<Q", buf, s[4] + 3 * RELA.size, offset)
    bad = edited(good, tmp_path, edit)
    assert run([*sizediff_cmd(), str(good), str(bad)]).returncode == 0    # symbols are intact
    p = run([*sizewatch_cmd(), "inspect", str(bad)])
    err = p.stderr.decode()
    assert p.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "corrupt relocation in .debug_info (offset past section end)" in err


def test_relocation_symbol_past_table(good, tmp_path):
    def edit(buf):
        nsyms = _symtab(buf)[1][5] // SYM.size
        s = _debug_rela(buf)
        info, = struct.unpack_from("<Q", buf, s[4] + 8)
        struct.pack_into("<Q", buf, s[4] + 8, (nsyms + 5) << 32 | info & 0xFFFFFFFF)
    bad = edited(good, tmp_path, edit)
    p = run([*sizewatch_cmd(), "inspect", str(bad)])
    err = p.stderr.decode()
    assert p.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "symbol index" in err and "past the symbol table" in err


def test_section_count_past_file(good, tmp_path):
    bad = edited(good, tmp_path, lambda b: struct.pack_into("<H", b, 0x3C, 0xFEFF))
    refused(good, bad, "section headers at")


@pytest.mark.parametrize("field,value", [(4, 1 << 40), (5, 1 << 40), (4, (1 << 64) - 8)],
                         ids=["offset", "size", "offset-wraps"])
def test_section_past_file(good, tmp_path, field, value):
    def edit(buf):
        sym, _ = _symtab(buf)
        struct.pack_into("<Q", buf, _shdr_at(bytes(buf), sym) + 24 + 8 * (field - 4), value)
    bad = edited(good, tmp_path, edit)
    refused(good, bad, "past end")


def test_section_header_offset_past_file(good, tmp_path):
    bad = edited(good, tmp_path, lambda b: struct.pack_into("<Q", b, 0x28, (1 << 64) - 64))
    refused(good, bad, "truncated ELF file")


def test_sparse_file_claiming_millions_of_sections(good, tmp_path):
    """4 KB of data, 1 GB of hole 'holding' 16.7 M section headers: refused at once, not read."""
    bad = tmp_path / "sparse.o"
    head = bytearray(good.read_bytes()[:64])
    struct.pack_into("<Q", head, 0x28, 64)
    struct.pack_into("<HHH", head, 0x3A, 64, 0, 0)
    count = 1 << 24
    with open(bad, "wb") as f:
        f.write(bytes(head) + SHDR.pack(0, 0, 0, 0, 0, count, 0, 0, 0, 0))
        f.write(b"\0" * (4096 - 128))
        f.truncate(64 + count * 64)
    if os.stat(bad).st_blocks * 512 >= bad.stat().st_size:
        pytest.skip("this filesystem does not keep holes")
    refused(good, bad, "sparse file")


def _ar(tmp_path: Path, body: bytes, thin: bool = False, members=("a.o",)) -> Path:
    out = tmp_path / "lib.a"
    out.write_bytes(archive([(m, body) for m in members], thin=thin))
    return out


@pytest.mark.parametrize("size,reason", [("-60", "is negative"), ("-1", "is negative"),
                                         ("0x10", "not a decimal number")])
def test_archive_member_size(good, tmp_path, size, reason):
    ar = bytearray(_ar(tmp_path, good.read_bytes(), members=("a.o", "b.o")).read_bytes())
    h = ar.index(b"/0 ")                      # the first member's header
    ar[h + 48:h + 58] = f"{size:<10}".encode()
    bad = tmp_path / "bad.a"
    bad.write_bytes(bytes(ar))
    refused(good, bad, reason)


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("size", ["99999999", "rest+1"])
def test_archive_member_size_past_file(good, tmp_path, which, size, bloat_o_meter):
    """A member whose size runs past the end of the file: nm lists the members before it and
    that member from the bytes there are, then stops (exit 0, nothing on stderr)."""
    ar = bytearray(_ar(tmp_path, good.read_bytes(), members=("a.o", "b.o", "c.o")).read_bytes())
    h = ar.index(f"/{5 * which} ".encode())
    v = size if size != "rest+1" else str(len(ar) - h - 60 + 1)
    ar[h + 48:h + 58] = f"{v:<10}".encode()
    bad = tmp_path / "bad.a"
    bad.write_bytes(bytes(ar))
    rows = as_nm(good, bad, bloat_o_meter, inspect=False)      # inspect takes no archives
    assert len(rows) == (which + 1) * len(our_listing(good))


def test_archive_member_size_misaligned(good, tmp_path):
    """One byte too long, inside the file: the next header is not where it says (nm: "malformed
    archive", exit 1): refused."""
    ar = bytearray(_ar(tmp_path, good.read_bytes(), members=("a.o", "b.o")).read_bytes())
    h = ar.index(b"/0 ")
    ar[h + 48:h + 58] = f"{good.stat().st_size + 1:<10}".encode()
    bad = tmp_path / "bad.a"
    bad.write_bytes(bytes(ar))
    refused(good, bad, "broken archive member header")


def test_archive_name_table_past_file(good, tmp_path):
    """The long name table's size runs past the end (nm: "file format not recognized"): refused."""
    ar = bytearray(_ar(tmp_path, good.read_bytes()).read_bytes())
    ar[8 + 48:8 + 58] = b"99999999  "
    bad = tmp_path / "bad.a"
    bad.write_bytes(bytes(ar))
    refused(good, bad, "past the end of the file")


def test_archive_long_name_past_table(good, tmp_path):
    ar = bytearray(_ar(tmp_path, good.read_bytes()).read_bytes())
    h = ar.index(b"/0 ")
    ar[h:h + 16] = b"/9999           "
    bad = tmp_path / "bad.a"
    bad.write_bytes(bytes(ar))
    refused(good, bad, "long name offset 9999 past the name table")


def test_thin_archive_member_fifo(good, tmp_path):
    os.mkfifo(tmp_path / "a.o")
    bad = _ar(tmp_path, good.read_bytes(), thin=True)
    refused(good, bad, "is a FIFO")


def test_thin_archive_member_symlink_loop(good, tmp_path):
    os.symlink("b.o", tmp_path / "a.o")
    os.symlink("a.o", tmp_path / "b.o")
    bad = _ar(tmp_path, good.read_bytes(), thin=True)
    refused(good, bad, "too many levels of symbolic links")


def test_thin_archive_member_missing_or_self(good, tmp_path):
    bad = _ar(tmp_path, good.read_bytes(), thin=True)
    refused(good, bad, "no such file")
    self_ref = _ar(tmp_path, good.read_bytes(), thin=True, members=("lib.a",))
    refused(good, self_ref, "nested archives are not supported")


def test_thin_archive_reads_its_members(good, tmp_path, bloat_o_meter):
    """The checks above refuse only damage: a sound thin archive still gives bloat-o-meter's output."""
    (tmp_path / "a.o").write_bytes(good.read_bytes())
    ar = _ar(tmp_path, good.read_bytes(), thin=True)
    p = run([*sizediff_cmd(), str(good), str(ar)])
    assert p.returncode == 0 and p.stdout == bloat_o_meter(good, ar).stdout


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink_loop", "device"])
def test_special_files(good, tmp_path, kind):
    if kind == "fifo":
        bad, reason = tmp_path / "x.o", "is a FIFO"
        os.mkfifo(bad)
    elif kind == "directory":
        bad, reason = tmp_path / "x.o", "is a directory"
        bad.mkdir()
    elif kind == "symlink_loop":
        bad, reason = tmp_path / "x.o", "too many levels of symbolic links"
        os.symlink("y.o", bad)
        os.symlink("x.o", tmp_path / "y.o")
    else:
        bad, reason = Path("/dev/zero"), "is a character device"
    refused(good, bad, reason)


@pytest.mark.kernel
def test_page_alloc_damage(example_series, tmp_path, bloat_o_meter):
    """The same on the real allocator object: a symbol string table without its last NUL,
    SHT_SYMTAB_SHNDX tables of bad sizes, and archives with a member running past the end."""
    good = example_series("gcc-12")[2].object_path
    bad = edited(good, tmp_path, lambda b: b.__setitem__(
        sections(bytes(b))[_symtab(b)[1][6]][4] + sections(bytes(b))[_symtab(b)[1][6]][5] - 1, 0x41))
    as_nm(good, bad, bloat_o_meter, inspect=False)
    for size in (8, 6, 4 * (_symtab(good.read_bytes())[1][5] // SYM.size) - 1):
        bad = edited(good, tmp_path, lambda b: make_shndx(b, size, (b"free_pages", b"__free_pages_ok")))
        as_nm(good, bad, bloat_o_meter, inspect=False)
    ar = bytearray(archive([("a.o", good.read_bytes()), ("b.o", good.read_bytes())]))
    h = ar.index(b"/5 ")
    ar[h + 48:h + 58] = b"99999999  "
    bad = tmp_path / "bad.a"
    bad.write_bytes(bytes(ar))
    as_nm(good, bad, bloat_o_meter, inspect=False)


def test_side_files_of_inspect(good, tmp_path):
    """inspect's other inputs: a remarks file or hot-path list that is a FIFO, and a gzip bomb."""
    import gzip
    fifo = tmp_path / "remarks.fifo"
    os.mkfifo(fifo)
    bomb = tmp_path / "remarks.json.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (300 << 20), 9))
    for args, reason in ((["--remarks", str(fifo)], "is a FIFO"), (["--hot", str(fifo)], "is a FIFO"),
                         (["--remarks", str(bomb)], "decompresses to more than 256 MB")):
        p = run([*sizewatch_cmd(), "inspect", str(good), *args])
        err = p.stderr.decode()
        assert p.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
        assert reason in err, err


def test_symbol_in_a_section_binutils_drops(good, tmp_path, bloat_o_meter):
    """Damage nm reads without complaint gives nm's reading: a function 'defined' in a relocation
    section or the symbol table is absolute to binutils, and left out of nm --size-sort."""
    def edit(buf):
        sym, st = _symtab(buf)
        names = bytes(buf[sections(bytes(buf))[st[6]][4]:])
        rela = _of_type(bytes(buf), SHT_RELA)[0]
        for k in range(st[5] // SYM.size):
            off = st[4] + k * SYM.size
            name = names[struct.unpack_from("<I", buf, off)[0]:].split(b"\0", 1)[0]
            if name == b"weakfn":            # weak: a letter whatever the section, then dropped
                struct.pack_into("<H", buf, off + 6, rela)
            if name == b"big":
                struct.pack_into("<H", buf, off + 6, sym)
    bad = edited(good, tmp_path, edit)
    p = run([*sizediff_cmd(), str(good), str(bad)])
    assert p.returncode == 0, p.stderr
    assert p.stdout == bloat_o_meter(good, bad).stdout
    assert b"weakfn" in p.stdout and b"big" in p.stdout      # both gone from the damaged file

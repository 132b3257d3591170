"""Hostile ELF files and archives made from real objects, shared by the tests and bench/fuzz.py.

A mutant is one real object (or an archive of objects) with one kind of damage a
stranger's file can carry: flipped bytes, an ELF/section/symbol/relocation field set
to an edge value, a truncation, a string table without NULs, a broken
SHT_SYMTAB_SHNDX, an archive header edited, or a special file (FIFO, directory,
symlink loop, sparse file) in its place. Everything is seeded: case N of seed S is
always the same file.
"""
from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass
from pathlib import Path

EDGE = (0, 1, 2, 3, 4, 7, 8, 15, 16, 0x7F, 0x80, 0xFF, 0x100, 0xFF00, 0xFFF1, 0xFFF2, 0xFFFF, 0x10000,
        0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1)
SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_SYMTAB_SHNDX = 2, 3, 4, 8, 18

SHDR = struct.Struct("<IIQQQQIIQQ")      # ELF64 little-endian section header
SYM = struct.Struct("<IBBHQQ")
RELA = struct.Struct("<QQq")
SHDR_FIELDS = ("name", "type", "flags", "addr", "offset", "size", "link", "info", "align", "entsize")
SYM_FIELDS = ("name", "info", "other", "shndx", "value", "size")
RELA_FIELDS = ("offset", "info", "addend")
EHDR_FIELDS = {"e_shoff": (0x28, "Q"), "e_shentsize": (0x3A, "H"), "e_shnum": (0x3C, "H"),
               "e_shstrndx": (0x3E, "H"), "e_type": (0x10, "H"), "e_machine": (0x12, "H"),
               "ei_class": (4, "B"), "ei_data": (5, "B")}


@dataclass
class Mutant:
    """One case: the path to read and what was done to it (for reports)."""
    path: Path
    kind: str
    detail: str


def _fit(value: int, fmt: str) -> int:
    return value & ((1 << (8 * struct.calcsize(fmt))) - 1)


def sections(data: bytes) -> list[tuple[int, ...]]:
    """The raw section headers of an intact ELF64 LE object (the sources are)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, = struct.unpack_from("<H", data, 0x3C)
    return [SHDR.unpack_from(data, shoff + i * SHDR.size) for i in range(shnum)]


def _shdr_at(data: bytes, i: int) -> int:
    return struct.unpack_from("<Q", data, 0x28)[0] + i * SHDR.size


def _of_type(data: bytes, typ: int) -> list[int]:
    return [i for i, s in enumerate(sections(data)) if s[1] == typ]


def _set(buf: bytearray, off: int, fmt: str, value: int) -> None:
    struct.pack_into("<" + fmt, buf, off, _fit(value, fmt))


def _value(rng: random.Random, data_len: int) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.choice(EDGE)
    if r < 0.8:
        return rng.choice((data_len - 1, data_len, data_len + 1, data_len // 2, data_len * 4096))
    return rng.getrandbits(rng.choice((8, 16, 32, 64)))


SAMPLE_C = r"""
static int counter;
int table[64] = {1, 2, 3};
const char *names[] = {"alpha", "beta", "gamma"};
static __attribute__((noinline)) int helper(int x) { return x * 3 + counter++; }
static inline int tiny(int x) { return x + 1; }
int api(int x) { return helper(x) + tiny(x) + table[x & 63]; }
int (*fp)(int) = api;
__attribute__((weak)) int weakfn(int y) { return y - api(y); }
void cold_path(void) __attribute__((cold));
void cold_path(void) { counter = 0; }
int big(int n) { int s = 0; for (int i = 0; i < n; i++) { s += helper(i); if (s > 1000) cold_path(); } return s; }
"""
SAMPLE_BUILDS = (("gcc-12", ("-ffunction-sections", "-fdata-sections")), ("gcc-12", ()),
                 ("clang-19", ("-ffunction-sections",)))


def compile_samples(where: Path) -> list[Path]:
    """SAMPLE_C built by real compilers (those installed), with and without per-function sections."""
    import shutil
    import subprocess
    src = where / "sample.c"
    src.write_text(SAMPLE_C)
    out = []
    for i, (cc, flags) in enumerate(SAMPLE_BUILDS):
        if shutil.which(cc) is None:
            continue
        obj = where / f"sample-{cc}-{i}.o"
        subprocess.run([cc, "-c", "-O2", "-g", *flags, "-o", str(obj), str(src)], check=True)
        out.append(obj)
    return out


# --- mutators over the bytes of one object: each returns (bytes, detail) -----------------

def byte_flips(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    n = rng.choice((1, 2, 4, 16, 64))
    hot = [(0, 64)] + [(_shdr_at(data, 0), len(sections(data)) * SHDR.size)]
    for i in _of_type(data, SHT_SYMTAB) + _of_type(data, SHT_RELA)[:4]:
        s = sections(data)[i]
        hot.append((s[4], s[5]))
    for _ in range(n):
        start, length = rng.choice(hot) if rng.random() < 0.7 else (0, len(buf))
        pos = start + rng.randrange(max(length, 1))
        if pos < len(buf):
            buf[pos] ^= 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
    return bytes(buf), f"{n} byte(s) changed"


def ehdr_field(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    name = rng.choice(list(EHDR_FIELDS))
    off, fmt = EHDR_FIELDS[name]
    v = _value(rng, len(data))
    _set(buf, off, fmt, v)
    return bytes(buf), f"{name}={_fit(v, fmt):#x}"


def shdr_field(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    secs = sections(data)
    interesting = _of_type(data, SHT_SYMTAB) + _of_type(data, SHT_STRTAB) + _of_type(data, SHT_RELA)[:6]
    i = rng.choice(interesting) if rng.random() < 0.6 else rng.randrange(len(secs))
    f = rng.randrange(len(SHDR_FIELDS))
    v = rng.choice((SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_SYMTAB_SHNDX, 9, 0)) \
        if SHDR_FIELDS[f] == "type" and rng.random() < 0.5 else _value(rng, len(data))
    fmt = "I" if f in (0, 1, 6, 7) else "Q"
    _set(buf, _shdr_at(data, i) + struct.calcsize("<" + "".join(
        "I" if k in (0, 1, 6, 7) else "Q" for k in range(f))), fmt, v)
    return bytes(buf), f"section {i} {SHDR_FIELDS[f]}={_fit(v, fmt):#x}"


def sym_field(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    i = _of_type(data, SHT_SYMTAB)[0]
    sec = sections(data)[i]
    nsyms = sec[5] // SYM.size
    k = rng.randrange(nsyms)
    f = rng.randrange(len(SYM_FIELDS))
    fmt = "IBBHQQ"[f]
    v = _value(rng, len(data))
    _set(buf, sec[4] + k * SYM.size + struct.calcsize("<" + "IBBHQQ"[:f]), fmt, v)
    return bytes(buf), f"symbol {k} {SYM_FIELDS[f]}={_fit(v, fmt):#x}"


def reloc_field(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    rels = [i for i in _of_type(data, SHT_RELA) if sections(data)[i][5]]
    if not rels:
        return byte_flips(rng, data)
    sec = sections(data)[rng.choice(rels)]
    k = rng.randrange(sec[5] // RELA.size)
    f = rng.randrange(3)
    v = _value(rng, len(data))
    if f == 1 and rng.random() < 0.5:    # the symbol index past the table, or an odd type
        v = (v << 32) | 2 if rng.random() < 0.5 else (1 << 32) | (v & 0xFFFFFFFF)
    off = sec[4] + k * RELA.size + 8 * f
    if f == 2:                              # the addend is signed
        v = _fit(v, "Q")
        struct.pack_into("<q", buf, off, v - (1 << 64) if v >= 1 << 63 else v)
    else:
        struct.pack_into("<Q", buf, off, _fit(v, "Q"))
    return bytes(buf), f"relocation {k} {RELA_FIELDS[f]}={v:#x}"


def truncate(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    n = rng.choice((rng.randrange(len(data)), rng.randrange(64), len(data) - rng.randrange(1, 4096)))
    n = max(0, min(n, len(data) - 1))
    return data[:n], f"truncated to {n} bytes"


def strtab_without_nul(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    i = rng.choice(_of_type(data, SHT_STRTAB))
    s = sections(data)[i]
    part = rng.choice(("all", "last"))
    lo = s[4] if part == "all" else s[4] + s[5] - 1
    for p in range(lo, s[4] + s[5]):
        if buf[p] == 0:
            buf[p] = 0x41
    return bytes(buf), f"string table {i}: {part} NULs replaced"


def symtab_shndx(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Turn a section into the symbol table's SHT_SYMTAB_SHNDX with a bad or short size, and
    (sometimes) point symbols at it with SHN_XINDEX."""
    buf = bytearray(data)
    secs = sections(data)
    sym = _of_type(data, SHT_SYMTAB)[0]
    nsyms = secs[sym][5] // SYM.size
    victim = rng.choice([i for i, s in enumerate(secs) if s[1] not in (SHT_SYMTAB, 0, SHT_NOBITS)
                         and i != struct.unpack_from("<H", data, 0x3E)[0] and i != secs[sym][6]])
    size = rng.choice((nsyms * 4 - 1, nsyms * 4 - 4, 2, 0, nsyms * 4 + 2, min(secs[victim][5], nsyms * 4)))
    size = max(0, min(size, len(data) - secs[victim][4]))
    off = _shdr_at(data, victim)
    struct.pack_into("<I", buf, off + 4, SHT_SYMTAB_SHNDX)
    struct.pack_into("<Q", buf, off + 32, size)
    struct.pack_into("<I", buf, off + 40, sym)
    for _ in range(rng.choice((0, 1, 8))):
        k = rng.randrange(1, nsyms)
        struct.pack_into("<H", buf, secs[sym][4] + k * SYM.size + 6, 0xFFFF)
    return bytes(buf), f"section {victim} as SHT_SYMTAB_SHNDX of {size} bytes for {nsyms} symbols"


OBJECT_MUTATORS = {"byte_flips": byte_flips, "ehdr_field": ehdr_field, "shdr_field": shdr_field,
                   "sym_field": sym_field, "reloc_field": reloc_field, "truncate": truncate,
                   "strtab_without_nul": strtab_without_nul, "symtab_shndx": symtab_shndx}


# --- archives -----------------------------------------------------------------------------

def ar_header(name: str, size: int | str, thin_size: int | None = None) -> bytes:
    text = str(size)
    return (f"{name:<16}{'0':<12}{'0':<6}{'0':<6}{'644':<8}{text:<10}".encode()[:58] + b"`\n")


def archive(members: list[tuple[str, bytes]], thin: bool = False) -> bytes:
    """A GNU archive (or a thin one: member bytes are not stored) with a long-name table."""
    names = b"".join(n.encode() + b"/\n" for n, _ in members)
    out = [b"!<thin>\n" if thin else b"!<arch>\n", ar_header("//", len(names)), names]
    if len(names) & 1:
        out.append(b"\n")
    off = 0
    for name, body in members:
        out.append(ar_header(f"/{off}", len(body)))
        off += len(name) + 2
        if not thin:
            out.append(body)
            if len(body) & 1:
                out.append(b"\n")
    return b"".join(out)


def archive_edit(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """An archive of two copies of the object with one header field edited."""
    ar = bytearray(archive([("a.o", data), ("b.o", data)]))
    headers = [m for m in range(8, len(ar) - 60) if ar[m + 58:m + 60] == b"`\n" and
               (m == 8 or ar[m - 1:m] == b"\n")][:3]
    h = rng.choice(headers)
    what = rng.choice(("size", "size", "name", "magic"))
    if what == "size":
        v = rng.choice(("-60", "-1", "-9999999", "999999999", "0", "1", "abc", "0x10", "", "1 2",
                        str(len(data) + 1), "+5"))
        ar[h + 48:h + 58] = f"{v:<10}".encode()[:10]
        return bytes(ar), f"member header {h:#x} size {v!r}"
    if what == "name":
        v = rng.choice(("/999999", "/5", "/", "//", "/SYM64/", "", "/0x", "a/b/../../x"))
        ar[h:h + 16] = f"{v:<16}".encode()[:16]
        return bytes(ar), f"member header {h:#x} name {v!r}"
    ar[h + 58:h + 60] = b"x\n"
    return bytes(ar), f"member header {h:#x} magic broken"


# --- one case -----------------------------------------------------------------------------

def special(rng: random.Random, data: bytes, where: Path) -> Mutant:
    """A FIFO, directory, symlink loop, device, sparse section-count bomb, or a thin archive
    whose member is one of those."""
    kind = rng.choice(("fifo", "directory", "symlink_loop", "device", "sparse_sections", "thin_fifo",
                       "thin_missing", "thin_loop", "thin_self"))
    path = where / "case.o"
    if kind in ("fifo", "thin_fifo"):
        os.mkfifo(where / "member.o")
    if kind == "fifo":
        return Mutant(where / "member.o", kind, "a FIFO nobody writes to")
    if kind == "directory":
        (where / "dir.o").mkdir()
        return Mutant(where / "dir.o", kind, "a directory")
    if kind in ("symlink_loop", "thin_loop"):
        os.symlink("loop-b.o", where / "loop-a.o")
        os.symlink("loop-a.o", where / "loop-b.o")
        if kind == "symlink_loop":
            return Mutant(where / "loop-a.o", kind, "a symlink loop")
        path.write_bytes(archive([("loop-a.o", data)], thin=True))
        return Mutant(path, kind, "a thin archive whose member is a symlink loop")
    if kind == "device":
        return Mutant(Path(rng.choice(("/dev/null", "/dev/zero", "/dev/tty"))), kind, "a device")
    if kind == "sparse_sections":
        buf = bytearray(data[:64])
        count = rng.choice((1 << 24, (1 << 24) - 1, 1 << 20))
        size = 64 + count * 64
        _set(buf, 0x28, "Q", 64)
        _set(buf, 0x3C, "H", 0)                   # the count in section 0's size
        _set(buf, 0x3E, "H", 0)
        hdr0 = SHDR.pack(0, 0, 0, 0, 0, count, 0, 0, 0, 0)
        with open(path, "wb") as f:
            f.write(bytes(buf) + hdr0 + b"\0" * (4096 - 128))
            f.truncate(size)
        return Mutant(path, kind, f"{size >> 20} MB sparse file claiming {count} sections")
    if kind == "thin_fifo":
        path.write_bytes(archive([("member.o", data)], thin=True))
        return Mutant(path, kind, "a thin archive whose member is a FIFO")
    if kind == "thin_missing":
        path.write_bytes(archive([("gone.o", data)], thin=True))
        return Mutant(path, kind, "a thin archive whose member is missing")
    path.write_bytes(archive([("case.o", data)], thin=True))
    return Mutant(path, kind, "a thin archive naming itself")


def make(seed: int, case: int, sources: list[bytes], where: Path) -> Mutant:
    """Case ``case`` of campaign ``seed``, written under ``where`` (an empty directory)."""
    rng = random.Random(seed * 1_000_003 + case)
    data = rng.choice(sources)
    r = rng.random()
    if r < 0.04:
        return special(rng, data, where)
    if r < 0.12:
        body, detail = archive_edit(rng, data)
        kind = "archive_edit"
    else:
        kind = rng.choice(list(OBJECT_MUTATORS))
        body, detail = OBJECT_MUTATORS[kind](rng, data)
        if rng.random() < 0.15:                   # a second, different damage
            k2 = rng.choice(list(OBJECT_MUTATORS))
            try:
                body, d2 = OBJECT_MUTATORS[k2](rng, body)
                kind, detail = f"{kind}+{k2}", f"{detail}; {d2}"
            except (struct.error, IndexError, ValueError, OverflowError):
                pass                              # the first damage left nothing to edit
    path = where / "case.o"
    path.write_bytes(body)
    return Mutant(path, kind, detail)


# --- running one case, as a user would meet it -------------------------------------------

@dataclass
class Outcome:
    """What one entry point did with a mutant: "ok", "InputError", "traceback" or "timeout"."""
    entry: str
    status: str
    detail: str            # the error line, or the traceback's last frame and exception
    seconds: float = 0.0
    rss_growth_kb: int = 0  # peak RSS of the run over the process it was forked from
    listing: list | None = None   # our nm --size-sort of the mutant (sizediff runs only)


def _where(tb) -> str:
    import traceback
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if "/analyzer/" in f.filename or "/cli/" in f.filename] or frames
    f = ours[-1]
    return f"{Path(f.filename).name}:{f.lineno}"


def entry_sizediff(base: Path, path: Path) -> tuple[str, list | None]:
    """``sizediff BASE MUTANT`` (bloat-o-meter's table) and the mutant's nm --size-sort listing."""
    from analyzer import bloat, formats
    from analyzer.elf import load_images
    from analyzer.nm import size_sort
    text = formats.bloat_text(bloat.diff_files(base, path))
    listing = sorted((s.size, s.letter, s.name) for img in load_images(path) for s in size_sort(img))
    return text, listing


def entry_inspect(path: Path) -> tuple[str, None]:
    """``sizewatch inspect MUTANT --json``: facts, findings and the text rendering."""
    import json

    from analyzer.findings import findings
    from analyzer.hotpaths import load
    from analyzer.inline_views import inspect_text
    from analyzer.inlines import analyze
    hot = load(None)
    facts = analyze(path)
    found = findings(facts, hot)
    json.dumps({"facts": facts.to_dict(), "findings": [f.to_dict() for f in found]})
    return inspect_text(facts, found, hot, True), None


def preload() -> None:
    """Import what the entry points use before forking, so that each case pays for its own work
    (the children share these pages) and not for importing numpy and capstone again."""
    import capstone  # noqa: F401

    import analyzer.bloat  # noqa: F401
    import analyzer.findings  # noqa: F401
    import analyzer.inline_views  # noqa: F401
    import analyzer.inlines  # noqa: F401
    from analyzer.hotpaths import load
    load(None)


def run_forked(entry: str, fn, *args, timeout: float = 10.0) -> Outcome:
    """Run ``fn(*args)`` in a forked child: a hang is killed after ``timeout`` seconds and the
    child's peak RSS is measured apart from ours."""
    import marshal
    import select
    import signal
    import time
    from analyzer.errors import SizewatchError
    rfd, wfd = os.pipe()
    base_kb = _rss_kb()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            try:
                _text, listing = fn(*args)
                payload = ("ok", "", listing)
            except SizewatchError as e:
                payload = ("InputError", str(e), None)
            except BaseException as e:       # noqa: BLE001 - the point is to catch everything
                payload = ("traceback", f"{type(e).__name__} at {_where(e.__traceback__)}: {e}"[:300], None)
            with os.fdopen(wfd, "wb") as w:
                w.write(marshal.dumps(payload))
        finally:
            os._exit(0)
    os.close(wfd)
    chunks = []
    deadline = t0 + timeout
    status = None
    with os.fdopen(rfd, "rb") as r:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                status = "timeout"
                break
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r.fileno(), 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    _, wstatus, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - t0
    growth = max(0, usage.ru_maxrss - base_kb)
    if status == "timeout":
        return Outcome(entry, "timeout", f"killed after {timeout:.0f} s", seconds, growth)
    if not chunks:
        return Outcome(entry, "traceback", f"child died (wait status {wstatus:#x})", seconds, growth)
    st, detail, listing = marshal.loads(b"".join(chunks))
    return Outcome(entry, st, detail, seconds, growth, listing)


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


_ZYGOTE = r"""
import os, sys, time
for line in sys.stdin:
    path, out, err, timeout = line.rstrip("\n").split("\0")
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(out, os.O_WRONLY), 1)
        os.dup2(os.open(err, os.O_WRONLY), 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.execvp("nm", ["nm", "--size-sort", path])
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got:
            break
        if time.perf_counter() - t0 > float(timeout):
            os.kill(pid, 9)
        time.sleep(0.001)
    print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, time.perf_counter() - t0, flush=True)
"""
_zygote = None


def comparable(listing: list) -> bool:
    """Can this listing be checked against nm's text? Not when a symbol name holds a newline."""
    return not any("\n" in name for _, _, name in listing)


def nm_listing(path: Path, timeout: float = 60.0) -> tuple[int, list | None, int, float]:
    """``nm --size-sort``: (exit status, listing or None if it warned or failed, peak RSS KB, seconds).

    nm is started from a small helper process (``python3 -S``), not from us: a child's peak
    RSS includes what it had before exec, and ours holds numpy and capstone.
    """
    import subprocess
    import sys
    import tempfile
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        _zygote = subprocess.Popen([sys.executable, "-S", "-c", _ZYGOTE], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
    with tempfile.NamedTemporaryFile() as out, tempfile.NamedTemporaryFile() as err:
        _zygote.stdin.write(f"{path}\0{out.name}\0{err.name}\0{timeout}\n")
        _zygote.stdin.flush()
        rc_s, rss_s, sec_s = _zygote.stdout.readline().split()
        rc, rss, seconds = int(rc_s), int(rss_s), float(sec_s)
        if rc != 0 or err.read().strip():
            return rc, None, rss, seconds
        rows = []
        # nm prints a name as its bytes: split on "\n" only (str.splitlines would also cut a name at
        # \x0b, \x0c, \x1c-\x1e or \x85); a name holding "\n" cannot be read back from nm's text at all
        for line in out.read().decode("utf-8", "surrogateescape").split("\n"):
            parts = line.split(" ", 2)
            if len(parts) == 3 and len(parts[1]) == 1:
                rows.append((int(parts[0], 16), parts[1], parts[2]))
        return rc, sorted(rows), rss, seconds

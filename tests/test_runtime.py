"""Executed instructions of the allocator's fast path under QEMU TCG (issue 26).

The pure part (the plugin's records, functions, per-pair figures, comparisons) on made data;
then real QEMU on the real ``allocator`` vmlinux of the example series (tests/kernel_images.py:
built once per machine): determinism, two oracles independent of the plugin (``objdump -d`` of a
straight-line function in a test module, and QEMU's own ``-d exec`` log), the series under
gcc-12 and clang-19, and every failure as one line.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.errors import InputError
from analyzer.runtime import (Function, FunctionIndex, Runtime, Window, order_run, parse_counts)
from analyzer.runtime_diff import compare

FIXTURES = Path(__file__).resolve().parent / "fixtures"


# --- the pure part ------------------------------------------------------------------------------

def test_records_parsed_and_checked():
    data = b"W 0\nI ffffffff81000000 20 5\nI ffffffff81000005 10 3\nE 0\nW 4\nI ffffffff81000000 1 5\n"
    (w,) = parse_counts(data, 10)                       # order 4's window never ended: dropped
    assert (w.order, w.pairs, w.total) == (0, 10, 30)
    assert w.counts[0xffffffff81000005] == (10, 3)
    for bad in (b"W 0\nI zz 1 1\nE 0\n", b"I ffffffff81000000 1 1\n", b"W 0\nE 1\n", b"W 0\nI 1 1 0\nE 0\n",
                b"X\n", b"W 0\nI 1 -1 1\nE 0\n"):
        with pytest.raises(InputError, match="instruction counts: line"):
            parse_counts(bad, 1)


def test_per_pair_figures_functions_lines_and_paths():
    fs = [Function("alloc", 0x1000, 0x40, True), Function("helper", 0x1040, 0x80, True),
          Function("lock", 0x2000, 0x10, False), Function("tick", 0x3000, 0x10, False)]
    idx = FunctionIndex(fs)
    assert idx.at(0x103f).name == "alloc" and idx.at(0x10c0) is None and idx.at(0xfff) is None
    pairs = 100
    counts = {0x1000: (100, 4), 0x1004: (100, 4), 0x1008: (30, 4),          # a branch taken 30 % of the time
              0x1040: (200, 4), 0x107e: (200, 4),                          # called twice per pair, crosses a line
              0x2000: (300, 2),                                            # outside the unit, 3 per pair
              0x3000: (7, 2)}                                              # an interrupt handler: left out
    r = order_run(Window(0, pairs, counts), idx, {"alloc": (0x1000, {0x1000, 0x1004, 0x100c})})
    assert r.unit_total == 100 + 100 + 30 + 200 + 200 and r.instructions == 6.3
    assert r.window_total == r.unit_total + 307
    assert set(r.functions) == {"alloc", "helper", "lock"}
    h = r.functions["helper"]
    assert (h.instructions, h.calls, h.lines, h.unit) == (4.0, 2.0, 2, True)   # 0x107e..0x1081: two lines
    assert r.functions["lock"].unit is False and r.functions["lock"].calls == 3.0
    assert r.lines == 3                                  # 0x1000 line, 0x1040 line, 0x1080 line
    (p,) = r.paths
    assert (p.executed, p.likely, p.off_likely, p.not_executed, p.agree) == (2, 3, [], [0x100c], False)
    back = Runtime("ok", pairs=pairs, orders=[r]).to_dict()
    assert Runtime.from_dict(back).to_dict() == back
    assert back["orders"]["0"]["per_pair"]["instructions"] == 6.3
    assert back["orders"]["0"]["functions"]["helper"]["instructions"] == 4.0


def test_compare_orders_and_functions():
    def run(insns_helper: float, calls_helper: float) -> Runtime:
        d = {"status": "ok", "pairs": 10, "orders": {"4": {
            "order": 4, "pairs": 10, "per_pair": {"instructions": 100 + insns_helper, "lines": 9},
            "unit_total": 0, "window_total": 0, "functions": {
                "get_page_from_freelist": {"address": 1, "unit": True, "instructions": 100, "calls": 1, "lines": 9, "total": 0},
                "__rmqueue_smallest": {"address": 2, "unit": True, "instructions": insns_helper, "calls": calls_helper,
                                       "lines": 2, "total": 0}}}}}
        return Runtime.from_dict(d)
    d = compare(run(40, 1), run(0, 0))
    (o,) = d.orders
    assert (o.instructions, o.delta, o.percent) == ((140.0, 100.0), -40.0, -28.57)
    (f,) = o.functions
    assert (f.name, f.delta, f.calls) == ("__rmqueue_smallest", -40.0, (1.0, 0.0))
    assert d.changed and not compare(run(40, 1), run(40, 1)).changed
    failed = Runtime("failed", "guest did not reach the benchmark: last console line: x")
    assert compare(run(1, 1), failed).message.startswith("guest did not reach")
    with pytest.raises(InputError):
        Runtime.from_dict({"status": "ok", "orders": {"0": {"order": "x"}}})


def test_measure_spec():
    from toolchains.runtime.measure import parse_spec
    assert parse_spec("") == (tuple(range(9)), 10000)
    assert parse_spec("orders=0,4,8,n=2000") == ((0, 4, 8), 2000)
    assert parse_spec("orders=0-3") == ((0, 1, 2, 3), 10000)
    assert parse_spec("n=5") == (tuple(range(9)), 5)
    for bad in ("orders=11", "orders=3-1", "n=0", "n=99999999", "x=1", "orders=,n=1", "orders=1\n"):
        with pytest.raises(InputError, match="bad measure spec"):
            parse_spec(bad)


def test_initramfs_is_what_cpio_reads(tmp_path):
    """The newc archive the guest unpacks, checked with GNU cpio (the oracle)."""
    from toolchains.runtime import guest
    ko = tmp_path / "m.ko"
    ko.write_bytes(b"\x7fELF" + bytes(range(256)) * 3)
    img = guest.initramfs(tmp_path / "i.cpio", ko, "orders=0,4 pairs=10")
    out = tmp_path / "x"
    out.mkdir()
    p = subprocess.run(["cpio", "-idv", "--no-absolute-filenames", "-F", str(img)], cwd=out, capture_output=True,
                       text=True)
    listed = subprocess.run(["cpio", "-tv", "-F", str(img)], capture_output=True, text=True).stdout
    assert re.search(r"^crw------- .* 5, +1 .* dev/console$", listed, re.M), listed
    assert (out / guest.MODULE).read_bytes() == ko.read_bytes()
    assert (out / "params").read_text() == "orders=0,4 pairs=10\n"
    assert os.access(out / "init", os.X_OK) and (out / "init").read_bytes()[:4] == b"\x7fELF"
    assert "dev/console" in p.stderr or (out / "dev").is_dir()


# --- real QEMU, the real allocator vmlinux ----------------------------------------------------

def kernel(test):
    """Real QEMU on the allocator vmlinux: a whole-kernel build (slow), then its build dir's module."""
    return pytest.mark.kernel(pytest.mark.slow(test))


@pytest.fixture(scope="module")
def gcc_images():
    from kernel_images import allocator_vmlinux
    return allocator_vmlinux("gcc-12", 3)


def build_dir_of(images, toolchain: str) -> Path:
    from kernel_images import CONFIG
    from toolchains.build import BuildOptions, layout
    return layout(images.tree, toolchain, CONFIG, BuildOptions()).build_dir


def measure(images, i: int, toolchain: str = "gcc-12", **kw) -> Runtime:
    from toolchains.runtime.measure import measure_vmlinux
    return measure_vmlinux(build_dir_of(images, toolchain), images.vmlinux[i], toolchain, **kw)


def stable(r: Runtime) -> dict:
    d = r.to_dict()
    d.pop("seconds")
    return d


@kernel
def test_two_measurements_are_equal_to_the_instruction(gcc_images):
    a = measure(gcc_images, 0, orders=(0, 4), pairs=2000)
    b = measure(gcc_images, 0, orders=(0, 4), pairs=2000)
    assert a.status == "ok", a.message
    assert stable(a) == stable(b)
    o0, o4 = a.orders
    # every pair runs the same path: the unit's count is an exact multiple of the pairs
    assert o0.instructions == int(o0.instructions) and o0.instructions > 100
    assert {"get_page_from_freelist", "__alloc_pages", "free_unref_page", "__free_pages"} <= set(o0.functions)
    assert o0.functions["__alloc_pages"].calls == 1.0 and o0.functions["__free_pages"].calls == 1.0
    assert o4.instructions > o0.instructions and o4.lines >= o0.lines > 0
    assert "qemu-system-x86_64" in a.emulator and "TCG" in a.emulator


@kernel
def test_straight_line_function_counts_what_objdump_shows(gcc_images, tmp_path):
    """Oracle 1, independent of our symbol placement: a straight-line function of a test module,
    called 1000 times in the window; the plugin's count per call over its bytes equals the
    instructions objdump -d shows from its entry to its return (SLS int3 padding after the
    return is not executed)."""
    from toolchains.registry import load
    from toolchains.runtime import guest, qemu
    bd = build_dir_of(gcc_images, "gcc-12")
    ko = guest.build_module(bd, load("gcc-12"), tmp_path, src=FIXTURES / "kmod_oracle")
    initrd = guest.initramfs(tmp_path / "i.cpio", ko, "")
    image = tmp_path / "vmlinux"
    shutil.copyfile(gcc_images.vmlinux[0], image)
    run = qemu.boot(image, initrd, tmp_path, 120)
    assert run.ended == "done", run.console[-2000:]
    m = re.search(r"sizewatch-oracle: straight at ([0-9a-f]+) calls (\d+)", run.console)
    addr, calls = int(m.group(1), 16), int(m.group(2))
    nm = subprocess.run(["nm", "-S", str(ko)], capture_output=True, text=True, check=True).stdout
    size = next(int(ln.split()[1], 16) for ln in nm.splitlines() if ln.endswith(" sizewatch_straight"))
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble=sizewatch_straight", str(ko)],
                         capture_output=True, text=True, check=True).stdout
    insns = re.findall(r"^\s+[0-9a-f]+:\s+(\S+)", dis, re.M)
    body = []
    for mnem in insns:
        body.append(mnem)
        if mnem.startswith(("ret", "jmp")):
            break
    assert 4 <= len(body) < len(insns) + 1, dis
    (w,) = parse_counts(run.counts, calls)
    inside = {a: c for a, (c, _) in w.counts.items() if addr <= a < addr + size}
    assert w.counts[addr][0] == calls
    assert sum(inside.values()) == calls * len(body), (sorted(inside.items()), body)
    assert set(inside.values()) == {calls}


@kernel
def test_plugin_agrees_with_qemus_exec_log(gcc_images, tmp_path):
    """Oracle 2: one boot, QEMU running one instruction per translation block with its own
    ``-d exec,nochain`` log filtered to two allocator functions, and the plugin counting the whole
    run: the log's executions per function equal the plugin's counts over the same bytes."""
    from analyzer.runtime import vmlinux_functions
    from toolchains.registry import load
    from toolchains.runtime import guest, qemu
    bd = build_dir_of(gcc_images, "gcc-12")
    image = tmp_path / "vmlinux"
    shutil.copyfile(gcc_images.vmlinux[0], image)
    fns = {f.name: f for f in vmlinux_functions(str(image)) if f.name in ("get_page_from_freelist", "__free_pages")}
    assert len(fns) == 2
    ko = guest.build_module(bd, load("gcc-12"), tmp_path)
    initrd = guest.initramfs(tmp_path / "i.cpio", ko, "orders=0 pairs=50 warmup=10")
    ranges = ",".join(f"{f.address:#x}+{f.size:#x}" for f in fns.values())
    log = tmp_path / "exec.log"
    run = qemu.boot(image, initrd, tmp_path, 300, whole=True,
                    extra=("-singlestep", "-d", "exec,nochain", "-dfilter", ranges, "-D", str(log)))
    assert run.ended == "done", run.console[-2000:]
    (w,) = parse_counts(run.counts, 1)
    assert w.order == 255
    executed: dict[str, int] = {n: 0 for n in fns}
    stopped: dict[str, int] = {n: 0 for n in fns}
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/", line)
        s = re.match(r"Stopped execution of TB chain before 0x[0-9a-f]+ \[([0-9a-f]+)\]", line)
        if m or s:
            pc = int((m or s).group(1), 16)
            for n, f in fns.items():
                if f.address <= pc < f.address + f.size:
                    (executed if m else stopped)[n] += 1
    for n, f in fns.items():
        plugin = sum(c for a, (c, _) in w.counts.items() if f.address <= a < f.address + f.size)
        assert plugin > 50 and plugin == executed[n] - stopped[n], (n, plugin, executed[n], stopped[n])


@kernel
@pytest.mark.parametrize("toolchain", ["gcc-12", "clang-19"])
def test_example_series_moves_order_4_both_ways(toolchain):
    """The seed's experiment, at run time: at order 4 (every allocation through rmqueue_buddy ->
    __rmqueue -> __rmqueue_smallest in 6.1) patch 1 pushes the helpers out of line (extra calls
    per pair appear) and patch 2 inlines them again: instructions per pair move in opposite
    directions. At order 0 (per-CPU lists) what moved is listed, if anything."""
    from kernel_images import allocator_vmlinux
    images = allocator_vmlinux(toolchain, 3)
    base, p1, p2 = (measure(images, i, toolchain, orders=(0, 4), pairs=1000) for i in range(3))
    for r in (base, p1, p2):
        assert r.status == "ok", r.message
    one, two = compare(base, p1), compare(p1, p2)
    d1, d2 = one.orders[1], two.orders[1]
    assert d1.order == d2.order == 4
    assert d1.delta * d2.delta < 0, (d1.to_dict(), d2.to_dict())
    out_of_line = {f.name for f in d1.functions if f.calls[0] == 0 and f.calls[1] >= 1}
    assert out_of_line & {"__rmqueue_smallest", "__rmqueue", "__rmqueue_fallback"}, [f.to_dict() for f in d1.functions]
    back = {f.name for f in d2.functions if f.calls[0] >= 1 and f.calls[1] == 0}
    assert back & out_of_line
    print(f"{toolchain} order 0: {one.orders[0].instructions} then {two.orders[0].instructions}")


# --- failures, each one line ------------------------------------------------------------------

def sizewatch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    from conftest import sizewatch_cmd
    return subprocess.run([*sizewatch_cmd(), *args], capture_output=True, text=True, env=env, timeout=600)


@kernel
def test_guest_failures_are_one_line(gcc_images, tmp_path):
    bad = measure(gcc_images, 0, orders=(12,), pairs=10)          # the module refuses: nothing measured
    assert bad.status == "failed"
    assert bad.message == ("guest did not reach the benchmark: last console line: "
                           "sizewatch-pagebench: order 12 out of range (0..10)"), bad.message
    panic = measure(gcc_images, 0, orders=(0,), pairs=10, append="rdinit=/nonexistent init=/nonexistent")
    assert panic.status == "failed" and panic.message.startswith("guest did not reach the benchmark: last console "
                                                                 "line: Kernel panic - not syncing: "), panic.message
    hang = measure(gcc_images, 0, orders=(0,), pairs=10, timeout=0.5)
    assert hang.status == "failed" and hang.message.startswith("guest did not finish within 0 s: last console line")
    true = tmp_path / "not-a-kernel"
    shutil.copyfile("/bin/true", true)
    from toolchains.runtime.measure import measure_vmlinux
    nope = measure_vmlinux(build_dir_of(gcc_images, "gcc-12"), true, "gcc-12", (0,), 10)
    assert nope.status == "failed" and "has no PVH entry note" in nope.message


@kernel
def test_cli_measure_and_missing_tools(gcc_images, tmp_path):
    bd = build_dir_of(gcc_images, "gcc-12")
    p = sizewatch("measure", str(bd), "--vmlinux", str(gcc_images.vmlinux[0]), "--orders", "0", "-n", "200",
                  "--json")
    assert p.returncode == 0, p.stderr
    import json
    d = json.loads(p.stdout)
    assert d["orders"]["0"]["per_pair"]["instructions"] > 100
    assert d["orders"]["0"]["functions"]["get_page_from_freelist"]["calls"] == 1.0
    p = sizewatch("measure", str(bd), "--vmlinux", str(gcc_images.vmlinux[0]), "--orders", "0", "-n", "200")
    assert p.returncode == 0 and "instructions, not cycles" in p.stdout and "get_page_from_freelist" in p.stdout
    p = sizewatch("measure", str(bd), "--orders", "0,99")
    assert p.returncode == 1 and p.stderr.strip() == ("sizewatch: bad measure spec 'orders=0,99,n=10000': orders "
                                                      "run from 0 to 10"), p.stderr
    env = dict(os.environ, SIZEWATCH_QEMU_PLUGIN_H=str(tmp_path / "nope.h"))
    p = sizewatch("measure", str(bd), "--orders", "0", env=env)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "plugin header is missing" in p.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = dict(os.environ, PATH=f"{bin_dir}:{Path(sys.executable).parent}")
    p = sizewatch("measure", str(bd), "--orders", "0", env=env)
    assert p.returncode == 1 and p.stderr.strip() == ("sizewatch: qemu-system-x86_64 not found: install Debian's "
                                                      "qemu-system-x86 (scripts/install.sh does)"), p.stderr
    p = sizewatch("measure", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


@kernel
def test_pipeline_measures_the_series_end_to_end(gcc_images, tmp_path):
    """``sizewatch run --measure`` on the real series (gcc-12, the allocator vmlinux, built once and
    cached): every vmlinux build is booted and measured, stored with the build, and the report
    (JSON and text) carries the per-order table, the extra calls of patch 1 and the finding."""
    import json
    from conftest import EXAMPLE_MBOX
    db = tmp_path / "s.db"
    p = sizewatch("run", "--db", str(db), "--series", str(EXAMPLE_MBOX), "--toolchains", "gcc-12",
                  "--targets", "vmlinux", "--config", "allocator", "--measure", "orders=0,4,n=500")
    assert p.returncode == 0, p.stderr[-3000:]
    p = sizewatch("report", "--db", str(db), "1", "--json")
    assert p.returncode == 0, p.stderr
    one, two = json.loads(p.stdout)["patches"]
    (t1,), (t2,) = one["toolchains"], two["toolchains"]
    r1, r2 = t1["runtime"], t2["runtime"]
    assert r1["status"] == r2["status"] == "ok"
    assert r1["orders"]["4"]["functions"]["__rmqueue_smallest"]["calls"] == 1.0
    assert "__rmqueue_smallest" not in r2["orders"]["4"]["functions"]
    d1 = {o["order"]: o for o in r1["comparison"]["orders"]}
    d2 = {o["order"]: o for o in r2["comparison"]["orders"]}
    assert d1[4]["delta"] == -d2[4]["delta"] != 0
    # the measurement stored is the one a direct measurement of the same file gives
    direct = measure(gcc_images, 1, orders=(0, 4), pairs=500)
    assert direct.order(4).instructions == r1["orders"]["4"]["per_pair"]["instructions"]
    kinds = {f["kind"] for f in t1["findings"]} | {f["kind"] for f in t2["findings"]}
    assert "fastpath_instructions" in kinds
    text = sizewatch("report", "--db", str(db), "1").stdout
    assert "counted under emulation (QEMU TCG): executed instructions, not cycles" in text


@kernel
@pytest.mark.slow
def test_the_bot_measures_and_mails_the_table(gcc_images, tmp_path):
    """``[bot] measure = true`` on the real series: the bot builds the allocator vmlinux, boots and
    measures it, and its mail carries the per-order table and says these are executed instructions
    under emulation, not cycles; patch 1's growth at order 4 is flagged."""
    import botlist
    md = tmp_path / "list"
    botlist.deliver(md, *botlist.series_v1())
    cfg = botlist.bot_config(tmp_path / "bot.toml", toolchains=["gcc-12"], targets=["vmlinux"],
                             config="allocator", measure=True,
                             report={"growth_bytes": 1024, "runtime_instructions": 2})
    p = sizewatch("bot", "--maildir", str(md), "--once", "--dry-run", "--policy", str(cfg),
                  "--db", str(tmp_path / "s.db"))
    assert p.returncode == 0, p.stderr[-3000:]
    mail = p.stdout
    assert mail.startswith("From "), (mail[:300], p.stderr[-2000:])
    assert "QEMU TCG" in mail and "not cycles" in mail
    assert re.search(r"^\s+4\s+64K\s+\d+\s+\d+\s+\+\d+", mail, re.M), mail[-4000:]
    assert "fastpath_instructions" in mail

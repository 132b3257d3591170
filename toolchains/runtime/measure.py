"""Measure a built vmlinux: boot it under QEMU TCG with the benchmark module and count the
allocator's executed instructions per alloc/free pair, per order (issue 26).

``measure_vmlinux`` never raises for what the guest does: a kernel that does not boot, panics,
hangs past the time limit, floods its console or prints no result is a ``Runtime`` with status
``failed`` and one line saying so. It raises (``MissingTool``) only when this machine lacks
QEMU, the plugin's header or a compiler, which no commit can fix.
"""
from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path

from analyzer.errors import InputError
from analyzer.hotpaths import HotPaths
from analyzer.runtime import (UNIT, FunctionIndex, Runtime, has_pvh_entry, order_run, parse_counts,
                              vmlinux_functions)
from toolchains.errors import BuildError
from toolchains.registry import Toolchain, load
from toolchains.runtime import guest, qemu

DEFAULT_ORDERS = tuple(range(9))          # the seed's page_bench table: order 0 .. 8
DEFAULT_PAIRS = 10000
MAX_PAIRS = 10_000_000
MAX_ORDER = 10                            # 6.1's MAX_ORDER is 11: orders 0..10
MAX_COUNTS = 256 << 20                    # bytes of plugin records read back
_RESULT = re.compile(r"sizewatch-pagebench: order (\d+) pairs (\d+) done (\d+)")


def parse_spec(spec: str) -> tuple[tuple[int, ...], int]:
    """``orders=0,4,8,n=2000`` (either part optional, ``""`` the defaults) -> (orders, pairs)."""
    orders, pairs = DEFAULT_ORDERS, DEFAULT_PAIRS
    spec = spec.strip()
    if not spec:
        return orders, pairs
    m = re.fullmatch(r"(?:orders=(\d+(?:[,-]\d+)*))?,?(?:n=(\d+))?", spec)
    if not m or not (m.group(1) or m.group(2)):
        raise InputError(f"bad measure spec {spec!r}: give orders=0,4,8 and/or n=PAIRS (e.g. orders=0-8,n=10000)")
    if m.group(1):
        got: list[int] = []
        for part in m.group(1).split(","):
            lo, _, hi = part.partition("-")
            a, b = int(lo), int(hi or lo)
            if a > b or b > MAX_ORDER:
                raise InputError(f"bad measure spec {spec!r}: orders run from 0 to {MAX_ORDER}")
            got += range(a, b + 1)
        orders = tuple(dict.fromkeys(got))
        if len(orders) > 16:
            raise InputError(f"bad measure spec {spec!r}: at most 16 orders")
    if m.group(2):
        pairs = int(m.group(2))
        if not 1 <= pairs <= MAX_PAIRS:
            raise InputError(f"bad measure spec {spec!r}: n runs from 1 to {MAX_PAIRS}")
    return orders, pairs


def toolchain_of(build_dir: Path) -> Toolchain:
    """The registry toolchain a build dir was configured with (its CONFIG_CC_VERSION_TEXT)."""
    from toolchains.registry import all_toolchains
    cfg = build_dir / ".config"
    try:
        text = cfg.read_text(errors="replace")
    except OSError:
        raise BuildError(f"{build_dir}: not a kernel build dir (no .config)") from None
    m = re.search(r'^CONFIG_CC_VERSION_TEXT="([^"]*)"', text, re.M)
    if not m:
        raise BuildError(f"{cfg}: no CONFIG_CC_VERSION_TEXT: give --toolchain")
    cc = m.group(1)
    gcc = re.match(r"gcc-(\d+) ", cc) or re.match(r"gcc \(Debian (\d+)\.", cc)
    clang = re.search(r"clang version (\d+)\.", cc)
    name = f"gcc-{gcc.group(1)}" if gcc else f"clang-{clang.group(1)}" if clang else None
    if name is None or name not in {t.name for t in all_toolchains()}:
        raise BuildError(f"{cfg}: compiler {cc[:60]!r} is not a known toolchain: give --toolchain")
    return load(name)


def _last_line(console: str) -> str:
    lines = [ln.strip() for ln in console.replace("\r", "").splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "(nothing)"


def _failed(message: str, console: str = "", seconds: float = 0.0, emulator: str = "") -> Runtime:
    tail = "\n".join(console.replace("\r", "").splitlines()[-30:])
    return Runtime("failed", message, pairs=0, emulator=emulator, seconds=round(seconds, 2), console=tail)


def _likely(vmlinux: Path, hot: HotPaths) -> dict[str, tuple[int, set[int]]]:
    from analyzer.likely_path import hot_likely_paths
    return {p.function: (p.start, {i.address for i in p.instructions}) for p in hot_likely_paths(str(vmlinux), hot)}


def measure_vmlinux(build_dir: Path, vmlinux: Path, toolchain: str | Toolchain | None = None,
                    orders: tuple[int, ...] = DEFAULT_ORDERS, pairs: int = DEFAULT_PAIRS,
                    timeout: float = 120.0, hot: HotPaths | None = None, unit: str = UNIT) -> Runtime:
    """Boot ``vmlinux`` (built in ``build_dir``) and count the allocator's fast path."""
    build_dir, vmlinux = Path(build_dir), Path(vmlinux)
    exe = qemu.qemu_binary()
    emulator = f"{qemu.QEMU} {qemu.qemu_version(exe)} (TCG, 1 vCPU)"
    qemu.plugin(exe)                                   # a missing header or compiler: said now
    guest.init_binary()
    tc = toolchain if isinstance(toolchain, Toolchain) else load(toolchain) if toolchain else toolchain_of(build_dir)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sizewatch-measure-") as tmp:
        work = Path(tmp)
        image = work / "vmlinux"
        try:
            shutil.copyfile(vmlinux, image)            # the analysed file, as it is: later builds cannot change it
        except OSError as e:
            raise BuildError(f"{vmlinux}: cannot read ({e.strerror})") from None
        try:
            if not has_pvh_entry(str(image)):
                return _failed(f"{vmlinux} has no PVH entry note: build it with CONFIG_PVH=y (the allocator "
                               f"config has it) so QEMU can boot it", emulator=emulator)
            functions = vmlinux_functions(str(image), unit)
            likely = _likely(image, hot or HotPaths())
        except InputError as e:
            return _failed(str(e), emulator=emulator)
        try:
            ko = guest.build_module(build_dir, tc, work)
        except BuildError as e:
            return _failed(str(e), emulator=emulator, seconds=time.monotonic() - t0)
        params = f"orders={','.join(map(str, orders))} pairs={pairs}"
        initrd = guest.initramfs(work / "initramfs.cpio", ko, params)
        run = qemu.boot(image, initrd, work, timeout)
        seconds = time.monotonic() - t0
        done = {int(o): (int(p), int(d)) for o, p, d in _RESULT.findall(run.console)}
        if run.ended == "timeout":
            return _failed(f"guest did not finish within {timeout:.0f} s: last console line: "
                           f"{_last_line(run.console)}", run.console, seconds, emulator)
        if run.ended == "console_flood":
            return _failed(f"guest printed over {qemu.CONSOLE_MAX >> 20} MiB: last console line: "
                           f"{_last_line(run.console)}", run.console, seconds, emulator)
        if run.ended != "done" or set(orders) - set(done):
            where = "reach the benchmark" if not done else "finish the benchmark"
            return _failed(f"guest did not {where}: last console line: {_last_line(run.console)}",
                           run.console, seconds, emulator)
        short = [o for o in orders if done[o][1] != pairs]
        if short:
            o = short[0]
            return _failed(f"order {o}: only {done[o][1]} of {pairs} allocations succeeded (guest memory too "
                           f"small?)", run.console, seconds, emulator)
        if len(run.counts) > MAX_COUNTS:
            return _failed(f"the plugin wrote {len(run.counts)} bytes of counts, over {MAX_COUNTS >> 20} MiB",
                           run.console, seconds, emulator)
        try:
            windows = {w.order: w for w in parse_counts(run.counts, pairs)}
        except InputError as e:
            return _failed(str(e), run.console, seconds, emulator)
        missing = [o for o in orders if o not in windows]
        if missing:
            return _failed(f"the plugin saw no window for order {missing[0]} (markers not executed?)",
                           run.console, seconds, emulator)
    index = FunctionIndex(functions)
    runs = [order_run(windows[o], index, likely) for o in orders]
    return Runtime("ok", "", unit, pairs, runs, emulator, round(seconds, 2))

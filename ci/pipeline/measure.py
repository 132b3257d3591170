"""The runtime measurement of a built vmlinux (issue 26), as the pipeline runs it: what ``--measure``
asks for (``Measure``, parsed strictly from ``orders=0,4,8,n=2000``) and the call that measures a
build's vmlinux in the build's own thread (``measure_build``).

Why in the build's thread: the guest module is built against the build dir, which the toolchain's
next build rewrites as soon as this one returns. So the measurement runs right after the build,
beside the unit hashes (``ci.pipeline.unit_cache``), holding the build dir's lock and only while the
build dir's vmlinux is the very file that is analysed and stored (same GNU build-id). The result
rides with the build (``builder.Built.runtimes``) into ``Store.record_build``'s one write.

A measurement that fails is a result: ``toolchains.runtime`` returns a failed ``Runtime`` for a
guest that does not get there, and a host error while it runs (OSError, a subprocess' error) is
stored as failed with its one line too. A missing prerequisite (QEMU, the plugin) is not a result of
the commit: its ``SizewatchError`` stops the run (or fails the queued job) with its one line, and
nothing is stored, so that the next run, once it is installed, measures these builds.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from analyzer.errors import InputError, SizewatchError
from analyzer.runtime import Runtime
from toolchains.kbuild import prepare_lock
from toolchains.locks import file_lock, reading

MAX_ORDER = 10                       # x86-64's largest buddy order (MAX_ORDER 11 in 6.1: orders 0..10)
MAX_PAIRS = 1_000_000                # per order: more only makes the guest run longer, not the figure truer
RUNTIME_MODULE = "toolchains.runtime.measure"


@dataclass(frozen=True)
class Measure:
    """What to measure per vmlinux: these orders, ``pairs`` alloc/free pairs each, within ``timeout`` s."""
    orders: tuple[int, ...] = tuple(range(9))
    pairs: int = 10000
    timeout: float = 120.0


def parse_measure(spec: str) -> Measure:
    """``""`` (the defaults), or ``orders=0,4,8,n=2000``: comma-separated, ``orders=`` taking the
    numbers up to the next ``key=``. Anything else is a one-line InputError."""
    spec = spec.strip()
    if not spec:
        return Measure()
    got: dict[str, list[str]] = {}
    key = None
    for token in (t.strip() for t in spec.split(",")):
        if "=" in token:
            key, _, token = token.partition("=")
            key = key.strip()
            if key not in ("orders", "n"):
                raise InputError(f"--measure: unknown option {key!r} in {spec!r} (known: orders=, n=)")
            if key in got:
                raise InputError(f"--measure: {key}= given twice in {spec!r}")
            got[key] = []
        elif key != "orders":
            raise InputError(f"--measure: {token!r} in {spec!r} belongs to no option (like orders=0,4,8,n=2000)")
        if not re.fullmatch(r"[0-9]{1,9}", token.strip()):
            raise InputError(f"--measure: {key}= wants whole numbers, got {token.strip()!r} in {spec!r}")
        got[key].append(token.strip())
    orders = tuple(int(o) for o in got.get("orders", [])) or Measure().orders
    if any(o > MAX_ORDER for o in orders):
        raise InputError(f"--measure: orders= must be 0..{MAX_ORDER}, got {max(orders)}")
    if len(set(orders)) != len(orders):
        raise InputError(f"--measure: orders= names an order twice in {spec!r}")
    pairs = int(got["n"][0]) if "n" in got else Measure().pairs
    if not 1 <= pairs <= MAX_PAIRS:
        raise InputError(f"--measure: n= must be 1..{MAX_PAIRS}, got {pairs}")
    return Measure(tuple(sorted(orders)), pairs)


def check_available() -> None:
    """Fail before any build when this sizewatch cannot measure at all."""
    try:
        found = importlib.util.find_spec(RUNTIME_MODULE) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise InputError(f"--measure: this sizewatch has no runtime measurement ({RUNTIME_MODULE} is missing)")


def measure_vmlinux(build_dir: Path, vmlinux: Path, toolchain: str, orders: tuple[int, ...], pairs: int,
                    timeout: float) -> Runtime:
    """``toolchains.runtime.measure.measure_vmlinux``: QEMU TCG, the guest module, the counting plugin."""
    from toolchains.runtime.measure import measure_vmlinux as run
    return run(build_dir, vmlinux, toolchain, orders=orders, pairs=pairs, timeout=timeout)


def one_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else "measurement failed (no message)"


def measure_one(build_dir: Path, vmlinux: Path, toolchain: str, m: Measure) -> Runtime:
    """Measure ``vmlinux`` if ``build_dir`` still holds it (same build-id), with the build dir locked
    for the whole measurement; a failure of the guest or the host is a failed ``Runtime`` with one
    line, a missing prerequisite (``SizewatchError``) is raised."""
    from ci.pipeline.unit_cache import linked_here
    try:
        with file_lock(prepare_lock(build_dir)), reading(vmlinux):
            if not linked_here(vmlinux, build_dir):
                return Runtime("failed", f"not measured: the build dir {build_dir} no longer holds this vmlinux "
                                         "(another build of it ran meanwhile)")
            rt = measure_vmlinux(build_dir, vmlinux, toolchain, m.orders, m.pairs, m.timeout)
    except FileNotFoundError:
        return Runtime("failed", f"not measured: {vmlinux} was deleted before it was measured")
    except SizewatchError:
        raise
    except (OSError, subprocess.SubprocessError) as e:
        return Runtime("failed", one_line(f"{type(e).__name__}: {e}"))
    if not isinstance(rt, Runtime):
        return Runtime("failed", f"measurement returned {type(rt).__name__}, not a measurement")
    if rt.status != "ok":
        rt.message = one_line(rt.message)
    return rt

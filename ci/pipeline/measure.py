"""The runtime measurement of a built vmlinux (issue 26), as the pipeline runs it: what ``--measure``
asks for (``Measure``, parsed strictly from ``orders=0,4,8,n=2000``) and the call that measures a
build's vmlinux in the build's own thread (``measure_one``).

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

import subprocess
from dataclasses import dataclass
from pathlib import Path

from analyzer.errors import InputError, SizewatchError
from analyzer.runtime import Runtime
from toolchains.kbuild import prepare_lock
from toolchains.locks import file_lock, reading
from toolchains.runtime.measure import DEFAULT_ORDERS, DEFAULT_PAIRS, measure_vmlinux, parse_spec


@dataclass(frozen=True)
class Measure:
    """What to measure per vmlinux: these orders, ``pairs`` alloc/free pairs each, within ``timeout`` s."""
    orders: tuple[int, ...] = DEFAULT_ORDERS
    pairs: int = DEFAULT_PAIRS
    timeout: float = 120.0


def parse_measure(spec: str) -> Measure:
    """``""`` (the defaults), or ``orders=0,4,8,n=2000`` (``toolchains.runtime.measure.parse_spec``, as
    ``sizewatch measure`` reads it); anything else is a one-line InputError naming the option."""
    try:
        orders, pairs = parse_spec(spec)
    except InputError as e:
        raise InputError(f"--measure: {e}") from None
    return Measure(tuple(sorted(orders)), pairs)


def check_available() -> None:
    """Fail before any build (hours for a first vmlinux) when this machine cannot measure at all:
    QEMU, its plugin and the guest's init are found or built now (``toolchains.runtime``'s
    ``MissingTool``, one line saying what to install)."""
    from toolchains.runtime import guest, qemu
    qemu.plugin(qemu.qemu_binary())
    guest.init_binary()


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

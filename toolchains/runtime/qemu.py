"""QEMU and sizewatch's counting plugin: finding them, building the plugin, booting a guest.

The plugin (``plugin.c`` beside this file) is compiled against the ``qemu-plugin.h`` of the
installed QEMU's own Debian source package (Debian ships no header; ``scripts/install.sh``
takes it from ``apt-get source qemu`` into ``HEADER_DIR``) and kept in the sizewatch cache,
keyed by the plugin's source, the header and the QEMU build it loads into.

A guest never sees the network or the host's files: no NIC, no drives, no shared folders, no
monitor; its only channels are the serial console (read by us, bounded) and the plugin's file.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.locks import file_lock
from toolchains.source import cache_dir

QEMU = "qemu-system-x86_64"
HERE = Path(__file__).resolve().parent
PLUGIN_SRC = HERE / "plugin.c"
HEADER_DIR = Path("/usr/local/include/sizewatch")          # scripts/install.sh puts qemu-plugin.h here
HEADER_ENV = "SIZEWATCH_QEMU_PLUGIN_H"
EXIT_PORT = 0xf4
EXIT_DONE = (0x31 << 1) | 1          # what QEMU exits with when the module wrote 0x31 to the exit port
CONSOLE_KEEP = 64 << 10              # bytes of the guest console kept (its end)
CONSOLE_MAX = 64 << 20               # a guest printing more than this is stopped
ICOUNT: list[str] = ["-icount", "shift=0,sleep=off"]
CPU = "qemu64"


class MissingTool(BuildError):
    """QEMU, the plugin header or the C compiler is not installed: says what to install."""


def qemu_binary() -> str:
    exe = shutil.which(QEMU)
    if exe is None:
        raise MissingTool(f"{QEMU} not found: install Debian's qemu-system-x86 (scripts/install.sh does)")
    return exe


def qemu_version(exe: str) -> str:
    """``7.2.22`` from ``QEMU emulator version 7.2.22 (Debian ...)``."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise MissingTool(f"{exe} does not run ({e})") from None
    words = out.split()
    if len(words) < 4 or words[:3] != ["QEMU", "emulator", "version"]:
        raise MissingTool(f"{exe}: not a QEMU emulator ({out.strip()[:80]!r})")
    return words[3]


def plugin_header() -> Path:
    env = os.environ.get(HEADER_ENV)
    path = Path(env) if env else HEADER_DIR / "qemu-plugin.h"
    if not path.is_file():
        raise MissingTool(f"{path}: QEMU's plugin header is missing: scripts/install.sh takes it from Debian's "
                          f"qemu source package (a deb-src line, apt-get source qemu)")
    return path


def _pkg_config(*args: str) -> list[str]:
    try:
        p = subprocess.run(["pkg-config", *args, "glib-2.0"], capture_output=True, text=True, timeout=60)
    except OSError:
        raise MissingTool("pkg-config not found: install Debian's pkg-config and libglib2.0-dev") from None
    if p.returncode:
        raise MissingTool("glib-2.0 development files not found: install Debian's libglib2.0-dev")
    return p.stdout.split()


def host_built(name: str, key: bytes, args: list[str], what: str, fails: type[BuildError] = BuildError) -> Path:
    """``name-<hash of key>`` compiled by the host's gcc with ``args`` (``-o`` is added) into the
    sizewatch cache once: the next call, in any process, finds it there. Built under a temporary name
    and renamed into place, so a half-written file is never used."""
    out_dir = cache_dir() / "runtime"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem, suffix = Path(name).stem, Path(name).suffix
    path = out_dir / f"{stem}-{hashlib.sha256(key).hexdigest()[:16]}{suffix}"
    if path.is_file():
        return path
    cc = shutil.which("gcc")
    if cc is None:
        raise MissingTool(f"gcc not found: {what} is built with the host's gcc")
    with file_lock(out_dir / f".{stem}.lock"):
        if path.is_file():
            return path
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}-", suffix=suffix, dir=out_dir)
        os.close(fd)
        p = subprocess.run([cc, "-o", tmp, *args], capture_output=True, text=True, timeout=300)
        if p.returncode:
            os.unlink(tmp)
            last = (p.stderr.strip().splitlines() or ["?"])[-1]
            raise fails(f"building {what} failed: {last[:200]}")
        os.replace(tmp, path)
    return path


def plugin(exe: str | None = None) -> Path:
    """The counting plugin for the installed QEMU, built once per (source, header, QEMU)."""
    exe = exe or qemu_binary()
    header = plugin_header()
    key = PLUGIN_SRC.read_bytes() + b"\0" + header.read_bytes() + b"\0" + qemu_version(exe).encode()
    return host_built("sizewatch-count.so", key,
                      ["-O2", "-shared", "-fPIC", "-Wall", f"-I{header.parent}", *_pkg_config("--cflags"),
                       str(PLUGIN_SRC), *_pkg_config("--libs")], "the QEMU plugin")


@dataclass
class GuestRun:
    """What one boot gave: how it ended, the console's end, the plugin's records."""
    ended: str                 # done | exited | timeout | console_flood | no_start
    returncode: int | None
    console: str               # the last CONSOLE_KEEP bytes, decoded
    counts: bytes
    seconds: float


def _tail(path: Path, n: int) -> str:
    """The last ``n`` bytes of a file, decoded (nothing if it is not there)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read(n).decode("utf-8", "replace")
    except OSError:
        return ""


def boot(vmlinux: Path, initrd: Path, work: Path, timeout: float, append: str = "",
         memory_mb: int = 256, count: bool = True, extra: tuple[str, ...] = (), whole: bool = False) -> GuestRun:
    """Boot ``vmlinux`` (an ELF with the PVH entry note: QEMU loads it as it is) under TCG on one
    vCPU with ``initrd``, counting with the plugin unless ``count`` is False; killed after
    ``timeout`` seconds. ``extra``: more QEMU options (the tests' ``-d exec`` oracle); ``whole``:
    the plugin counts the whole run instead of the marked windows.

    Deterministic: ``-icount shift=0,sleep=off`` ties the guest's clock to its instruction count,
    the RTC starts at a fixed date on that clock, the console is a file (never waits on a reader)
    and ``nolapic_timer`` skips the APIC timer calibration (a 0.2 s busy wait, 10 s of emulation at
    one instruction per nanosecond), so two boots of one vmlinux execute the same instructions."""
    exe = qemu_binary()
    counts = work / "counts.txt"
    # the console goes to a file, not a pipe: a write to a file never has to wait for a reader,
    # so the guest's timing (and where its timer interrupts land) does not depend on the host's
    console_path = work / "console.log"
    argv = [exe, "-accel", "tcg", *ICOUNT, "-machine", "pc", "-cpu", CPU, "-smp", "1", "-m", str(memory_mb),
            "-nodefaults", "-no-user-config", "-rtc", "base=2024-01-01T00:00:00,clock=vm", "-nographic", "-no-reboot", "-nic", "none",
            "-serial", f"file:{console_path}", "-monitor", "none", "-parallel", "none",
            "-device", f"isa-debug-exit,iobase={EXIT_PORT:#x},iosize=0x04",
            "-kernel", str(vmlinux), "-initrd", str(initrd),
            "-append", f"console=ttyS0 nokaslr panic=-1 oops=panic rdinit=/init nolapic_timer {append}".strip()]
    if count:
        argv += ["-plugin", f"{plugin(exe)},out={counts}" + (",whole=1" if whole else "")]
    argv += list(extra)
    t0 = time.monotonic()
    try:
        # QEMU's own messages: small, read once it has exited
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=work, start_new_session=True)
    except OSError as e:
        raise MissingTool(f"{exe} does not start ({e})") from None
    ended = ""
    deadline = t0 + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            ended = "timeout"
            break
        try:
            if console_path.stat().st_size > CONSOLE_MAX:
                ended = "console_flood"
                break
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, err = proc.communicate()
    rc = proc.returncode
    if not ended:
        ended = "done" if rc == EXIT_DONE else "exited"
    console = _tail(console_path, CONSOLE_KEEP)
    if ended == "exited" and err.strip():
        console += "\n" + err.decode("utf-8", "replace")[-2000:]
    data = counts.read_bytes() if counts.is_file() else b""
    return GuestRun(ended, rc, console, data, time.monotonic() - t0)

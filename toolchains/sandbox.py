"""Untrusted builds under bubblewrap: no network, nothing writable but the build dir.

A patch from a mailing list can change Makefiles and scripts that run at build time. Every
make and compiler run of a build therefore runs as::

    bwrap --unshare-all (net, pid, ipc, uts, cgroup) --die-with-parent --cap-drop ALL
          --ro-bind / /  --dev /dev --proc /proc
          --tmpfs /tmp /var/tmp /run $HOME <cache> <store dir> ...   (masked: empty, throw-away)
          --ro-bind <git tree> --ro-bind <worktree> --bind <build dir> [--bind <ccache dir>]
          --clearenv --setenv PATH ... -- <command>

so the build sees the system read-only, its own source read-only, and can write only to
its build dir (and the ccache store when enabled); the user's home, the sizewatch store,
other build dirs and the environment's secrets are not visible, and a fresh network
namespace has nothing but its own loopback. On by default; ``SIZEWATCH_SANDBOX=0`` or
``--no-sandbox`` turns it off (trusted trees, or a machine without bwrap).

Known limit: the build dir persists, so a hostile commit can still leave things in its
own (toolchain, config) build dir that later builds there read.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from toolchains.errors import BuildError

ENV_SWITCH = "SIZEWATCH_SANDBOX"
ENV_MASK = "SIZEWATCH_SANDBOX_MASK"        # extra paths to hide, ':'-separated


_probe: dict[str, str | None] = {}


def unavailable() -> str | None:
    """Why bubblewrap cannot sandbox builds on this machine (None when it can); probed once."""
    if "result" not in _probe:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            _probe["result"] = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
        else:
            proc = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
                                   "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"],
                                  capture_output=True, text=True)
            err = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            _probe["result"] = None if proc.returncode == 0 else f"bubblewrap cannot sandbox builds here ({err}){_in_container()}"
    return _probe["result"]


def _in_container() -> str:
    """What to say when the probe fails inside a container: the engine's defaults are why."""
    if not (Path("/run/.containerenv").exists() or Path("/.dockerenv").exists() or os.environ.get("container")):
        return ""
    return ("; in a container run it with --security-opt systempaths=unconfined (the engine's masked /proc paths "
            "refuse bwrap's /proc; on Docker also seccomp=unconfined and apparmor=unconfined), as compose.yaml's "
            "workers are")


def enabled_by_default() -> bool:
    return os.environ.get(ENV_SWITCH, "1").lower() not in ("0", "no", "off", "false")


def default_masks(cache: Path) -> list[Path]:
    """What a build must not see: home, temp dirs, runtime sockets, the cache and the store."""
    paths = [Path("/tmp"), Path("/var/tmp"), Path("/run"), Path.home(), cache,
             Path("/etc/sizewatch")]
    db = os.environ.get("SIZEWATCH_DB")
    if db and "://" not in db:                  # a store file (a database URL names no path here)
        paths.append(Path(db).expanduser().resolve().parent)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"):
        if os.environ.get(var):
            paths.append(Path(os.environ[var]))
    for p in os.environ.get(ENV_MASK, "").split(":"):
        if p.strip():
            paths.append(Path(p.strip()))
    return paths


@dataclass(frozen=True)
class Sandbox:
    """How commands of one build are run: ``wrap`` turns an argv into the sandboxed argv."""
    enabled: bool
    writable: tuple[Path, ...] = ()          # the build dir, the ccache store
    readable: tuple[Path, ...] = ()          # the git tree, the worktree
    masked: tuple[Path, ...] = ()
    path: str = field(default_factory=lambda: os.environ.get("PATH", "/usr/bin:/bin"))
    env_extra: tuple[tuple[str, str], ...] = ()

    def env(self) -> dict[str, str]:
        """The whole environment of a build: nothing inherited but PATH (no secrets, no KCFLAGS)."""
        env = {"PATH": self.path, "LANG": "C", "LC_ALL": "C", "TERM": "dumb",     # C: gcc quotes 'like this'
               "HOME": str(Path.home()), "TMPDIR": "/tmp"}
        env.update(dict(self.env_extra))
        return env

    def wrap(self, argv: list[str], cwd: Path) -> list[str]:
        if not self.enabled:
            return list(argv)
        why = unavailable()
        if why:
            raise BuildError(f"{why}; builds of trusted trees only: --no-sandbox or SIZEWATCH_SANDBOX=0")
        out = [str(shutil.which("bwrap")), "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
               "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for m in self.masked:
            m = Path(m)
            if not m.is_dir() or m == Path("/"):
                continue
            out += ["--tmpfs", str(m.resolve())]     # what the build needs is bound back below
        for p in self.readable:
            rp = Path(p).resolve()
            out += ["--ro-bind", str(rp), str(rp)]
        for p in self.writable:
            rp = Path(p).resolve()
            out += ["--bind", str(rp), str(rp)]
        out += ["--chdir", str(Path(cwd).resolve()), "--clearenv"]
        for k, v in self.env().items():
            out += ["--setenv", k, v]
        return [*out, "--", *argv]

"""Which registry toolchains are installed (and exactly which version), and installing them with apt."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from toolchains.errors import BuildError
from toolchains.registry import Toolchain, all_toolchains, load


@dataclass(frozen=True)
class ToolchainStatus:
    name: str
    family: str
    installed: bool
    version: str | None               # the compiler's exact version line, when installed
    packages: tuple[str, ...]
    missing: tuple[str, ...]          # packages not installed yet
    suite: str

    def to_dict(self) -> dict:
        return asdict(self)


def package_installed(pkg: str) -> bool:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return proc.returncode == 0 and proc.stdout.strip().endswith("install ok installed")


def status(tc: Toolchain) -> ToolchainStatus:
    missing = tuple(p for p in tc.packages if not package_installed(p))
    installed = tc.installed and not missing
    return ToolchainStatus(tc.name, tc.family, installed, tc.version() if tc.installed else None,
                           tc.packages, missing, tc.suite)


def statuses() -> list[ToolchainStatus]:
    return [status(tc) for tc in all_toolchains()]


def apt_commands(names: list[str]) -> list[list[str]]:
    """The apt-get commands that install ``names`` (unknown names: BuildError)."""
    pkgs: list[str] = []
    for n in names:
        for p in load(n).packages:
            if p not in pkgs:
                pkgs.append(p)
    sudo = [] if os.geteuid() == 0 or shutil.which("sudo") is None else ["sudo"]
    return [[*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", *pkgs]]


def install(names: list[str], log=lambda s: None) -> list[ToolchainStatus]:
    """Install the toolchains' Debian packages; ``apt-get update`` once if apt does not know them yet."""
    if not names:
        raise BuildError("name the toolchains to install (see `sizewatch toolchains`)")
    (cmd,) = apt_commands(names)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log(" ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 and ("Unable to locate package" in proc.stderr or "no installation candidate" in proc.stderr):
        update = [*cmd[:cmd.index("apt-get")], "apt-get", "update", "-q"]
        log(" ".join(update))
        subprocess.run(update, capture_output=True, text=True, env=env)
        log(" ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("E:")] or proc.stderr.splitlines() or ["?"]
        raise BuildError(f"apt-get install failed: {lines[-1].strip()}")
    return [status(load(n)) for n in names]

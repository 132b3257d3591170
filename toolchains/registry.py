"""Toolchains as data: one TOML file per compiler under toolchains/registry/."""
from __future__ import annotations

import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from toolchains.errors import BuildError

REGISTRY_DIR = Path(__file__).with_name("registry")
# what `sizewatch run`, `build`, the bot and the dashboard's re-run use when not told: one gcc, one clang
DEFAULT_TOOLCHAINS = ("gcc-12", "clang-19")


def sort_key(name: str) -> tuple:
    """Display order of toolchains: gcc first, then clang, each by version (gcc-11 before gcc-12)."""
    fam, _, ver = name.partition("-")
    return (fam != "gcc", fam, int(ver) if ver.isdigit() else 0, name)


ARCHES = ("x86_64", "arm64")          # kbuild ARCH= values a registry entry can build for


@dataclass(frozen=True)
class Toolchain:
    """One compiler building for one architecture: the entry's top level is x86_64 (native); an
    ``[arch.arm64]`` table gives the cross compiler's packages, kbuild variables and driver
    (Debian's gcc-N-aarch64-linux-gnu; clang is multi-target and needs only ARCH=arm64)."""
    name: str
    family: str                      # "gcc" or "clang"
    packages: tuple[str, ...]        # Debian packages that provide it
    make_vars: dict[str, str]        # kbuild variables, e.g. {"LLVM": "-19"}
    compiler: str                    # the compiler driver binary
    version_command: tuple[str, ...]
    suite: str = "bookworm"          # the Debian suite that ships it (clang-22: bookworm-security)
    arch: str = "x86_64"             # what this entry builds for
    arches: tuple[str, ...] = ("x86_64",)   # every arch the registry entry builds for

    @property
    def installed(self) -> bool:
        return shutil.which(self.compiler) is not None

    def make_args(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.make_vars.items()]

    def version(self) -> str:
        """The exact version line the compiler prints (recorded with every build)."""
        if not self.installed:
            raise BuildError(f"toolchain {self.name} is not installed (apt-get install {' '.join(self.packages)})")
        out = subprocess.run(list(self.version_command), capture_output=True, text=True).stdout
        return out.splitlines()[0].strip() if out else "unknown"


def load(name: str, arch: str = "x86_64") -> Toolchain:
    """The registry entry ``name`` building for ``arch`` (a one-line error for an unknown name, an
    unknown arch, or an arch this compiler is not packaged for)."""
    path = REGISTRY_DIR / f"{name}.toml"
    if not path.exists():
        known = ", ".join(t.name for t in all_toolchains())
        raise BuildError(f"unknown toolchain {name!r} (known: {known})")
    if arch not in ARCHES:
        raise BuildError(f"unknown arch {arch!r} (known: {', '.join(ARCHES)})")
    d = tomllib.loads(path.read_text())
    cross = d.get("arch", {})
    arches = ("x86_64", *sorted(a for a in cross if a in ARCHES))
    top = d
    if arch != "x86_64":
        if arch not in cross:
            raise BuildError(f"toolchain {name} does not build {arch} here (it builds: {', '.join(arches)})")
        top = {**d, **cross[arch]}
    return Toolchain(d["name"], d["family"], tuple(top["packages"]), dict(top["make_vars"]),
                     top["compiler"], tuple(top["version_command"]), d.get("suite", "bookworm"), arch, arches)


def all_toolchains() -> list[Toolchain]:
    return [load(p.stem) for p in sorted(REGISTRY_DIR.glob("*.toml"), key=lambda p: sort_key(p.stem))]

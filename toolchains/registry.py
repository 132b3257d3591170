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


@dataclass(frozen=True)
class Toolchain:
    name: str
    family: str                      # "gcc" or "clang"
    packages: tuple[str, ...]        # Debian packages that provide it
    make_vars: dict[str, str]        # kbuild variables, e.g. {"LLVM": "-19"}
    compiler: str                    # the compiler driver binary
    version_command: tuple[str, ...]
    suite: str = "bookworm"          # the Debian suite that ships it (clang-22: bookworm-security)

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


def load(name: str) -> Toolchain:
    path = REGISTRY_DIR / f"{name}.toml"
    if not path.exists():
        known = ", ".join(t.name for t in all_toolchains())
        raise BuildError(f"unknown toolchain {name!r} (known: {known})")
    d = tomllib.loads(path.read_text())
    return Toolchain(d["name"], d["family"], tuple(d["packages"]), dict(d["make_vars"]),
                     d["compiler"], tuple(d["version_command"]), d.get("suite", "bookworm"))


def all_toolchains() -> list[Toolchain]:
    return [load(p.stem) for p in sorted(REGISTRY_DIR.glob("*.toml"), key=lambda p: sort_key(p.stem))]

"""What sets a build apart beyond its toolchain: the kernel arch and the LTO mode (issue 30).

A stored build names its config by key (``toolchains.kbuild.Config.key``): ``NAME-HASH`` for x86_64
without LTO (keys that predate arches), ``NAME-arm64-HASH``, ``NAME-[arm64-]thinlto-HASH``. The
dashboard's columns, the queue's job lines and the reports' headings show a build as its toolchain
with a flavour: ``gcc-12``, ``gcc-12 arm64``, ``clang-19 thinlto``, ``clang-19 arm64 thinlto``.
"""
from __future__ import annotations

from toolchains.registry import sort_key

LTO_MODES = ("none", "thin")               # the dashboard's ?lto= values ("none": built without LTO)


def lto_of_key(key: str) -> str:
    """``thin`` for a config key built with ThinLTO (``...-thinlto-HASH``), else ``""``."""
    return "thin" if "-thinlto-" in key else ""


def flavour(arch: str, lto: str) -> str:
    """`` arm64``, `` thinlto``, `` arm64 thinlto`` or ``""`` (x86_64 without LTO)."""
    return ("" if arch == "x86_64" else f" {arch}") + (f" {lto}lto" if lto else "")


def label(toolchain: str, arch: str = "x86_64", lto: str = "") -> str:
    """A build's column: its toolchain with its flavour (``gcc-12 arm64``)."""
    return toolchain + flavour(arch, lto)


def label_key(text: str) -> tuple:
    """Display order of labels: by toolchain (``registry.sort_key``), x86_64 before the other arches,
    without LTO before ThinLTO."""
    tc, *rest = text.split(" ")
    return (sort_key(tc), [r for r in rest if not r.endswith("lto")], [r for r in rest if r.endswith("lto")])


def matches(arch: str, key: str, want_arch: str | None, want_lto: str | None) -> bool:
    """Whether a build (its arch and config key) passes the dashboard's ``?arch=`` and ``?lto=`` filters
    (None: any; ``lto=none``: built without LTO)."""
    lto = lto_of_key(key)
    return (want_arch is None or arch == want_arch) and (want_lto is None or lto == ("" if want_lto == "none"
                                                                                      else want_lto))


def run_flags(key: str) -> list[str] | None:
    """The ``sizewatch run``/``bisect`` options that build a stored config key again: ``--config NAME``
    (not for defconfig, the default), ``--arch ARCH`` (not for x86_64), ``--lto thin``; None for a config
    with extra lines (no named config's key)."""
    from toolchains.kbuild import preset_of
    got = preset_of(key)
    if got is None:
        return None
    name, arch, lto = got
    return (([] if name == "defconfig" else ["--config", name]) + ([] if arch == "x86_64" else ["--arch", arch])
            + (["--lto", lto] if lto else []))

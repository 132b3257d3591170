"""Query parameters and path ids checked before they reach the store: malformed input is a 400
with a message that says what was expected, never a 500."""
from __future__ import annotations

import re

from flask import abort, request

# whole-string patterns, always used with fullmatch: "$" would also match before a final newline
# ("alloc_pages\n" passing as a function name)
_TOOLCHAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
_FUNCTION = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]{0,255}")
_TARGET = re.compile(r"[A-Za-z0-9_./+-]{1,255}")
_TREE = re.compile(r"[A-Za-z0-9_.+-]{1,128}")
_HEX = re.compile(r"[0-9a-fA-F]{4,40}")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def int_arg(name: str, default: int, lo: int, hi: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"\d{1,9}", raw.strip()):
        abort(400, description=f"query parameter {name}={raw!r}: expected a whole number from {lo} to {hi}")
    value = int(raw)
    if not lo <= value <= hi:
        abort(400, description=f"query parameter {name}={value}: expected a whole number from {lo} to {hi}")
    return value


def flag_arg(name: str) -> bool:
    raw = request.args.get(name)
    if raw is None:
        return False
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    abort(400, description=f"query parameter {name}={raw!r}: expected 1 or 0")


def _checked(name: str, raw: str | None, pattern: re.Pattern, what: str) -> str | None:
    if raw is None or raw == "":
        return None
    if not pattern.fullmatch(raw):
        abort(400, description=f"query parameter {name}={raw[:80]!r}: expected {what}")
    return raw


def toolchain_arg(name: str = "toolchain") -> str | None:
    return _checked(name, request.args.get(name), _TOOLCHAIN, "a toolchain name such as gcc-12 or clang-19")


def toolchains_arg(name: str = "toolchains") -> list[str] | None:
    raw = request.args.get(name)
    if raw is None or raw.strip() == "":
        return None
    return [_checked(name, t.strip(), _TOOLCHAIN, "toolchain names separated by commas (gcc-12,clang-19)")
            for t in raw.split(",") if t.strip()] or None


def target_arg(name: str = "target") -> str | None:
    return _checked(name, request.args.get(name), _TARGET, "a build target such as mm/page_alloc.o")


def tree_arg(name: str = "tree") -> str | None:
    return _checked(name, request.args.get(name), _TREE, "a tree name such as linux-6.1")


def choice_arg(name: str, choices: tuple[str, ...], default: str) -> str:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if raw not in choices:
        abort(400, description=f"query parameter {name}={raw[:40]!r}: expected one of {', '.join(choices)}")
    return raw


def arch_arg(name: str = "arch") -> str | None:
    """``?arch=``: only the builds of one kernel arch (None: every arch)."""
    from toolchains.registry import ARCHES
    got = choice_arg(name, ("", *ARCHES), "")
    return got or None


def lto_arg(name: str = "lto") -> str | None:
    """``?lto=``: only the builds of one LTO mode (``none`` or ``thin``; None: every mode)."""
    from toolchains.flavour import LTO_MODES
    got = choice_arg(name, ("", *LTO_MODES), "")
    return got or None


def commit_ref(rev: str) -> str:
    """A path's commit id: 4 to 40 hex digits (a prefix is fine when it is unique in the store)."""
    if not _HEX.fullmatch(rev):
        abort(400, description=f"{rev[:60]!r} is not a commit id: expected 4 to 40 hex digits")
    return rev.lower()


def function_name(name: str) -> str:
    if not _FUNCTION.fullmatch(name):
        abort(400, description=f"{name[:60]!r} is not a function name: expected a C identifier "
                               f"(clone suffixes such as .part.0 allowed)")
    return name


def valid_toolchain(name: str) -> bool:
    return _TOOLCHAIN.fullmatch(name) is not None


def valid_target(name: str) -> bool:
    return _TARGET.fullmatch(name) is not None

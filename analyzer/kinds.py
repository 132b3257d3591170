"""Finding kinds: the one list of what sizewatch flags, with each kind's severity and report order.

Every report (terminal text, Markdown, JSON, the bot's mails, the dashboard) sorts and colours
findings from here, so a new kind is added in one place: a member below, then the code that
produces it (``analyzer.findings`` for object facts, ``ci.bot.verdict`` for series-level ones)
and, for the bot, a ``[report]`` switch of the same name in ``ci.bot.policy``.

The enum's values are the names stored in the database and printed in reports; members compare
equal to those strings (``Kind.NEWLY_INLINED == "newly_inlined"``).
"""
from __future__ import annotations

from enum import Enum

# most severe first; a dashboard cell's colour and every "worst finding" follow this order
SEVERITIES = ("error", "warning", "notice", "info")
_SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}


class Scope(str, Enum):
    """What a finding is about, which decides where it is computed and how reports group it."""
    OBJECT = "object"        # one build's object alone (analyzer.findings.findings)
    CHANGE = "change"        # a build against its parent build (analyzer.findings.compare)
    BUILD = "build"          # whether the patch builds at all, under one or every compiler
    SERIES = "series"        # a series as a whole: did it apply, did every patch arrive, how much it grew


class Kind(str, Enum):
    """Finding kinds in report order (the order reports list them in, most urgent first)."""

    def __new__(cls, value: str, severity: str, scope: Scope, title: str) -> "Kind":
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.severity = severity
        obj.scope = scope
        obj.title = title
        return obj

    BUILD_ERROR = ("build_error", "error", Scope.BUILD, "the patch breaks the build under every compiler")
    BUILD_ERROR_ONE_COMPILER = ("build_error_one_compiler", "error", Scope.BUILD,
                                "the patch breaks the build under some compilers")
    ALWAYS_INLINE_COPY = ("always_inline_copy", "error", Scope.OBJECT,
                          "an __always_inline function has an out-of-line copy")
    HOT_NOT_INLINED = ("hot_not_inlined", "warning", Scope.OBJECT, "a hot-path inline function is not inlined")
    BOUNDARY_CROSSING = ("boundary_crossing", "warning", Scope.CHANGE,
                         "a hot function grew across an alignment or cache-line boundary")
    # where a hot function lands after the link (analyzer.link_layout, a vmlinux target)
    LINK_CACHE_LINES = ("link_cache_lines", "warning", Scope.CHANGE,
                        "a hot function spans more 64-byte cache lines at its link address")
    # the fast path measured under emulation (analyzer.runtime_findings, a measured vmlinux);
    # a decrease is the same kind reported as info
    FASTPATH_INSTRUCTIONS = ("fastpath_instructions", "warning", Scope.CHANGE,
                             "the allocator's fast path executes more instructions per alloc/free pair")
    FASTPATH_LINES = ("fastpath_lines", "warning", Scope.CHANGE,
                      "the allocator's fast path touches more 64-byte instruction lines per alloc/free pair")
    GROWTH = ("growth", "warning", Scope.SERIES, "the target grew past the configured threshold")
    INLINE_GROWTH = ("inline_growth", "warning", Scope.SERIES,
                     "an inline function's bytes in the whole target grew past the configured threshold")
    PUSHED_OUT_OF_LINE = ("pushed_out_of_line", "warning", Scope.CHANGE,
                          "an unchanged function left inline because another one became inlined")
    NEWLY_OUT_OF_LINE = ("newly_out_of_line", "warning", Scope.CHANGE, "a function is no longer inlined")
    # what an inline change does to the likely path comes after the change itself
    LIKELY_PATH_CALL = ("likely_path_call", "warning", Scope.CHANGE,
                        "a new call on a hot function's likely path")
    LIKELY_PATH_LINES = ("likely_path_lines", "notice", Scope.CHANGE,
                         "a hot function's likely path touches more 64-byte lines")
    LIKELY_PATH_CYCLES = ("likely_path_cycles", "notice", Scope.CHANGE,
                          "a hot function's likely path costs more estimated cycles (llvm-mca)")
    LINK_PHASE = ("link_phase", "notice", Scope.CHANGE,
                  "a hot function's entry changed its 64-byte phase at its link address")
    NOT_APPLIED = ("not_applied", "error", Scope.SERIES, "a patch of the series does not apply")
    INCOMPLETE = ("incomplete", "notice", Scope.SERIES, "patches of the series never arrived")
    INLINE_NOT_INLINED = ("inline_not_inlined", "notice", Scope.OBJECT, "an inline function is not inlined")
    NEWLY_INLINED = ("newly_inlined", "info", Scope.CHANGE, "a function is now inlined")

    def __str__(self) -> str:
        return self.value


_ORDER = {k.value: i for i, k in enumerate(Kind)}
_SEVERITY = {k.value: k.severity for k in Kind}


def order(kind: str) -> int:
    """A kind's place in reports; kinds this sizewatch does not know (an older store's) go last."""
    return _ORDER.get(kind, len(_ORDER))


def severity_of(kind: str) -> str:
    """The severity a kind is reported with ('info' for unknown kinds)."""
    return _SEVERITY.get(kind, "info")


def severity_rank(severity: str | None) -> int:
    """0 for 'error' ... 3 for 'info'; unknown or missing severities rank after every known one."""
    return _SEVERITY_RANK.get(severity or "", len(SEVERITIES))


def kinds(scope: Scope) -> tuple[Kind, ...]:
    """The kinds of one scope, in report order."""
    return tuple(k for k in Kind if k.scope is scope)


INLINE_CHANGES = (Kind.PUSHED_OUT_OF_LINE, Kind.NEWLY_OUT_OF_LINE, Kind.NEWLY_INLINED)

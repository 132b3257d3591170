"""A finding's details as a dataclass per shape, so readers use attributes instead of keys.

``analyzer.findings`` (and ``cost``, ``runtime_findings``) write a finding's details as a plain
dict, which is what the store keeps (``Finding.to_dict()``). :func:`read` turns that dict back
into the class of its kind once, where the store reads findings (``db.builds``); the pages, the
mail and the bot then read ``f.details.reason`` and friends. The compiler's reason is looked up
here only (:attr:`Details.reasons`, :attr:`Details.reason`).

A dict of the wrong shape (a field of the wrong type: a row damaged on disk or written by another
tool) is a :class:`BadDetails`; the store marks it as damage and uses :func:`empty` instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.align import Placement
from analyzer.kinds import Kind
from analyzer.link_layout import Move


class BadDetails(ValueError):
    """A stored details dict whose field holds the wrong type (says which field)."""


@dataclass(frozen=True)
class Details:
    """What every shape has: the compiler's inline reasons (first the one it reported first)."""
    reasons: tuple[str, ...] = ()

    @property
    def reason(self) -> str | None:
        """The first reason, the one a report shows beside a function; None without one."""
        return self.reasons[0] if self.reasons else None


@dataclass(frozen=True)
class OutOfLineCopy(Details):
    """always_inline_copy, hot_not_inlined, inline_not_inlined: an out-of-line copy in one object."""
    size: int = 0
    declared: str = "unknown"
    callers: dict[str, int] = field(default_factory=dict)
    call_sites: int = 0
    address_taken: bool = False
    symbols: tuple[str, ...] = ()
    inlined_count: int = 0


@dataclass(frozen=True)
class InlineChange(Details):
    """A function's inline status in the parent's build (``base``) and this one (``head``)."""
    base: str = ""
    head: str = ""
    declared_base: str | None = None
    declared_head: str | None = None


@dataclass(frozen=True)
class NowInlined(InlineChange):
    """newly_inlined: the out-of-line copy (``base_size`` bytes) is gone."""
    base_size: int | None = None
    inlined_into: dict[str, int] = field(default_factory=dict)
    inlined_bytes: int = 0


@dataclass(frozen=True)
class NowOutOfLine(InlineChange):
    """newly_out_of_line, pushed_out_of_line (``pushed_by``: the functions that became inlined)."""
    size: int | None = None
    callers: dict[str, int] = field(default_factory=dict)
    pushed_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Crossing(Details):
    """boundary_crossing: a hot function's placement before and after, and what it crossed."""
    base: Placement | None = None
    head: Placement | None = None
    crossed: tuple[str, ...] = ()
    delta: int | None = None
    placed: bool = False


@dataclass(frozen=True)
class LinkMove(Details):
    """link_cache_lines, link_phase: the hot function's move in the linked image."""
    move: Move | None = None


@dataclass(frozen=True)
class LikelyPath(Details):
    """likely_path_*: the hot function's likely path before and after (``analyzer.likely_path_cost`` dicts)."""
    base_path: dict = field(default_factory=dict)
    head_path: dict = field(default_factory=dict)
    new_calls: tuple[str, ...] = ()
    callee_reasons: dict[str, list] = field(default_factory=dict)
    percent: float | None = None


@dataclass(frozen=True)
class FastPath(Details):
    """fastpath_*: the measured orders past the thresholds (``analyzer.runtime_diff`` dicts)."""
    orders: tuple[dict, ...] = ()
    thresholds: dict = field(default_factory=dict)
    measure: str = ""


SHAPES: dict[str, type[Details]] = {
    **dict.fromkeys((Kind.ALWAYS_INLINE_COPY, Kind.HOT_NOT_INLINED, Kind.INLINE_NOT_INLINED), OutOfLineCopy),
    Kind.NEWLY_INLINED: NowInlined,
    **dict.fromkeys((Kind.NEWLY_OUT_OF_LINE, Kind.PUSHED_OUT_OF_LINE), NowOutOfLine),
    Kind.BOUNDARY_CROSSING: Crossing,
    **dict.fromkeys((Kind.LINK_CACHE_LINES, Kind.LINK_PHASE), LinkMove),
    **dict.fromkeys((Kind.LIKELY_PATH_CALL, Kind.LIKELY_PATH_LINES, Kind.LIKELY_PATH_CYCLES), LikelyPath),
    **dict.fromkeys((Kind.FASTPATH_INSTRUCTIONS, Kind.FASTPATH_LINES), FastPath),
}
SHAPES = {k.value: v for k, v in SHAPES.items()}


def shape(kind: str) -> type[Details]:
    """The details class of a kind; plain :class:`Details` for kinds without details (or unknown)."""
    return SHAPES.get(kind, Details)


def empty(kind: str) -> Details:
    """A kind's details with nothing known: what a finding without (readable) details reads as."""
    return shape(kind)()


_NUMBER = (int, float)


def _get(raw: dict, key: str, types: type | tuple, default):
    v = raw.get(key)
    if v is None:
        return default
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(v, allowed) or (isinstance(v, bool) and bool not in allowed):
        raise BadDetails(f"details field {key!r} holds {type(v).__name__}")
    return v


def _names(raw: dict, key: str) -> tuple[str, ...]:
    return tuple(str(x) for x in _get(raw, key, list, []))


def _reasons(raw: dict) -> tuple[str, ...]:
    """The one reason lookup: the list of reasons, else the single one; in order, each once."""
    got = _get(raw, "reasons", list, []) or ([_get(raw, "reason", str, "")] if raw.get("reason") else [])
    return tuple(dict.fromkeys(str(r) for r in got))


def _placement(raw: dict, key: str) -> Placement | None:
    d = _get(raw, key, dict, None)
    try:
        return Placement.from_dict(d) if d else None
    except TypeError as e:
        raise BadDetails(f"details field {key!r}: {e}") from None


def _move(raw: dict) -> Move | None:
    if not raw:
        return None
    try:
        return Move.from_dict(raw)
    except (KeyError, TypeError, AttributeError) as e:
        raise BadDetails(f"details of a link move: {type(e).__name__} {e}") from None


def read(kind: str, raw: object) -> Details:
    """``raw`` (a finding's stored details dict; None or {} when it has none) as its kind's class."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise BadDetails(f"details hold {type(raw).__name__}, not an object")
    cls, why = shape(kind), _reasons(raw)
    if cls is OutOfLineCopy:
        return OutOfLineCopy(why, _get(raw, "size", int, 0), _get(raw, "declared", str, "unknown"),
                             dict(_get(raw, "callers", dict, {})), _get(raw, "call_sites", int, 0),
                             bool(_get(raw, "address_taken", (bool, int), False)), _names(raw, "symbols"),
                             _get(raw, "inlined_count", int, 0))
    if cls in (NowInlined, NowOutOfLine):
        common = (why, _get(raw, "base", str, ""), _get(raw, "head", str, ""),
                  _get(raw, "declared_base", str, None), _get(raw, "declared_head", str, None))
        if cls is NowInlined:
            return NowInlined(*common, _get(raw, "base_size", int, None), dict(_get(raw, "inlined_into", dict, {})),
                              _get(raw, "inlined_bytes", int, 0))
        return NowOutOfLine(*common, _get(raw, "size", int, None), dict(_get(raw, "callers", dict, {})),
                            _names(raw, "pushed_by"))
    if cls is Crossing:
        return Crossing(why, _placement(raw, "base"), _placement(raw, "head"), _names(raw, "crossed"),
                        _get(raw, "delta", int, None), _get(raw, "placed", bool, False))
    if cls is LinkMove:
        return LinkMove(why, _move(raw))
    if cls is LikelyPath:
        return LikelyPath(why, dict(_get(raw, "base_path", dict, {})), dict(_get(raw, "head_path", dict, {})),
                          _names(raw, "new_calls"), dict(_get(raw, "callee_reasons", dict, {})),
                          _get(raw, "percent", _NUMBER, None))
    if cls is FastPath:
        return FastPath(why, tuple(_get(raw, "orders", list, [])), dict(_get(raw, "thresholds", dict, {})),
                        _get(raw, "measure", str, ""))
    return Details(why)

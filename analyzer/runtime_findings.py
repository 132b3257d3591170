"""Findings from two measurements of the fast path (``analyzer.runtime_diff``): instructions per
alloc/free pair or 64-byte lines per pair that grew past a threshold, at any measured order.

The counts are deterministic (executed instructions under QEMU TCG, inside the measured unit), so
a threshold is not there to hide noise but to say how much change is worth a human: a finding
about one target, naming every order over the limit. A decrease past the same limits is the same
kind at severity info (good news is reported, never flagged).
"""
from __future__ import annotations

from dataclasses import dataclass

from analyzer.errors import InputError
from analyzer.findings import Finding
from analyzer.kinds import Kind
from analyzer.runtime_diff import OrderDelta, RuntimeDiff
from analyzer.runtime_views import _size


@dataclass(frozen=True)
class RuntimeThresholds:
    """When a change per pair is a finding. Instructions: the change must exceed ``instructions``
    per pair AND ``percent`` of the parent's figure (0 turns that condition off; both 0: any change).
    Lines: a change of at least ``lines`` 64-byte lines per pair (0: never a finding)."""
    instructions: float = 2.0
    percent: float = 1.0
    lines: int = 1

    def __post_init__(self) -> None:
        # checked here so the command line, the bot config and tests get the same one-line error
        for name in ("instructions", "percent"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
                raise InputError(f"runtime {name} threshold: expected a number >= 0, got {v!r}")
        if isinstance(self.lines, bool) or not isinstance(self.lines, int) or self.lines < 0:
            raise InputError(f"runtime lines threshold: expected a whole number of 64-byte lines >= 0, "
                             f"got {self.lines!r}")

    def limit_text(self) -> str:
        parts = [f"{self.instructions:g} instructions" if self.instructions else "",
                 f"{self.percent:g}%" if self.percent else ""]
        return " and ".join(p for p in parts if p) or "no change"

    def over(self, d: OrderDelta) -> bool:
        """Whether an order's instruction change (either way) passes both limits."""
        size = abs(d.delta)
        pct = abs(d.percent) if d.instructions[0] else float("inf")
        return size > 0 and size > self.instructions and pct > self.percent


def _n(x: float) -> str:
    return f"{x:.0f}" if x == int(x) else f"{x:.2f}"


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + _n(x)


def _order_text(d: OrderDelta) -> str:
    top = next((f for f in d.functions if f.unit), None)
    most = f"; {top.name} {_signed(top.delta)}" if top is not None and top.delta else ""
    return (f"order {d.order} ({_size(d.order)}) {_n(d.instructions[0])} -> {_n(d.instructions[1])} "
            f"({_signed(d.delta)}, {_signed(d.percent)}%{most})")


def _lines_text(d: OrderDelta) -> str:
    return f"order {d.order} ({_size(d.order)}) {d.lines[0]} -> {d.lines[1]} ({d.lines_delta:+d})"


def _details(ds: list[OrderDelta], t: RuntimeThresholds) -> dict:
    return {"orders": [d.to_dict() for d in ds],
            "thresholds": {"instructions": t.instructions, "percent": t.percent, "lines": t.lines},
            "measure": "executed instructions under QEMU TCG, not cycles"}


def compare(diff: RuntimeDiff | None, target: str = "vmlinux", t: RuntimeThresholds = RuntimeThresholds()
            ) -> list[Finding]:
    """The findings of one comparison: at most one warning and one info per kind."""
    if diff is None or not diff.orders:
        return []
    out: list[Finding] = []
    over = [d for d in diff.orders if t.over(d)]
    for grew, ds in ((True, [d for d in over if d.delta > 0]), (False, [d for d in over if d.delta < 0])):
        if ds:
            verb = "executes more" if grew else "executes fewer"
            limit = f", over the limit of {t.limit_text()}" if grew else ""
            out.append(Finding(Kind.FASTPATH_INSTRUCTIONS.value, target,
                               f"the fast path {verb} instructions per alloc/free pair under emulation: "
                               + ", ".join(_order_text(d) for d in ds) + limit,
                               "" if grew else "info", _details(ds, t)))
    if t.lines:
        for grew in (True, False):
            ds = [d for d in diff.orders if (d.lines_delta if grew else -d.lines_delta) >= t.lines]
            if ds:
                verb = "touches more" if grew else "touches fewer"
                limit = f", at least {t.lines} more" if grew else ""
                out.append(Finding(Kind.FASTPATH_LINES.value, target,
                                   f"the fast path {verb} 64-byte instruction lines per alloc/free pair: "
                                   + ", ".join(_lines_text(d) for d in ds) + limit,
                                   "" if grew else "info", _details(ds, t)))
    return out

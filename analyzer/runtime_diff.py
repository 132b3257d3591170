"""Two measurements of the fast path compared per order: the seed's page_bench table, in
executed instructions (``analyzer.runtime``), model in and model out."""
from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.runtime import OrderRun, Runtime


@dataclass
class FunctionDelta:
    name: str
    unit: bool
    instructions: tuple[float, float]      # per pair, before -> after (0 where it did not run)
    calls: tuple[float, float]
    lines: tuple[int, int]

    @property
    def delta(self) -> float:
        return round(self.instructions[1] - self.instructions[0], 2)

    def to_dict(self) -> dict:
        return {"name": self.name, "unit": self.unit, "instructions": list(self.instructions),
                "delta": self.delta, "calls": list(self.calls), "lines": list(self.lines)}


@dataclass
class OrderDelta:
    order: int
    instructions: tuple[float, float]      # per pair inside the measured unit, before -> after
    lines: tuple[int, int]
    functions: list[FunctionDelta] = field(default_factory=list)   # those that changed, biggest |delta| first

    @property
    def delta(self) -> float:
        return round(self.instructions[1] - self.instructions[0], 2)

    @property
    def percent(self) -> float:
        return round(100.0 * self.delta / self.instructions[0], 2) if self.instructions[0] else 0.0

    @property
    def lines_delta(self) -> int:
        return self.lines[1] - self.lines[0]

    def to_dict(self) -> dict:
        return {"order": self.order, "instructions": list(self.instructions), "delta": self.delta,
                "percent": self.percent, "lines": list(self.lines), "lines_delta": self.lines_delta,
                "functions": [f.to_dict() for f in self.functions]}


@dataclass
class RuntimeDiff:
    """Per order present in both measurements; ``orders`` is empty when either failed."""
    base_status: str
    head_status: str
    orders: list[OrderDelta] = field(default_factory=list)
    message: str = ""                       # why there is no comparison (a failed measurement)

    @property
    def changed(self) -> bool:
        return any(o.delta or o.lines_delta or o.functions for o in self.orders)

    def to_dict(self) -> dict:
        return {"base_status": self.base_status, "head_status": self.head_status, "message": self.message,
                "changed": self.changed, "orders": [o.to_dict() for o in self.orders]}


# a function is listed as changed when it moved by at least this much per pair: periodic kernel
# work (vmstat, timers) that lands in a window adds a few hundredths to shared helpers
MIN_DELTA = 0.5


def _functions(a: OrderRun, b: OrderRun) -> list[FunctionDelta]:
    out = []
    for name in dict.fromkeys([*a.functions, *b.functions]):
        fa, fb = a.functions.get(name), b.functions.get(name)
        ia, ib = (fa.instructions if fa else 0.0), (fb.instructions if fb else 0.0)
        ca, cb = (fa.calls if fa else 0.0), (fb.calls if fb else 0.0)
        la, lb = (fa.lines if fa else 0), (fb.lines if fb else 0)
        if abs(ib - ia) >= MIN_DELTA or abs(cb - ca) >= MIN_DELTA or la != lb:
            out.append(FunctionDelta(name, bool((fa or fb).unit), (ia, ib), (ca, cb), (la, lb)))
    out.sort(key=lambda f: (-abs(f.delta), -abs(f.calls[1] - f.calls[0]), f.name))
    return out


def compare(base: Runtime, head: Runtime) -> RuntimeDiff:
    """base -> head, order by order."""
    if base.status != "ok" or head.status != "ok":
        failed = head if head.status != "ok" else base
        return RuntimeDiff(base.status, head.status, [], failed.message)
    orders = []
    for a in base.orders:
        b = head.order(a.order)
        if b is None:
            continue
        orders.append(OrderDelta(a.order, (a.instructions, b.instructions), (a.lines, b.lines), _functions(a, b)))
    return RuntimeDiff(base.status, head.status, orders)

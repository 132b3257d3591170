"""A patch's runtime measurement in a report (issue 26): this build's executed instructions per
alloc/free pair beside its parent's, per order (``analyzer.runtime_diff``), and where a hot function's
executed path left its static likely path. Read from the store alone (``Store.runtime_for``)."""
from __future__ import annotations

from dataclasses import dataclass

from analyzer.runtime import PathCheck, Runtime
from analyzer.runtime_diff import RuntimeDiff, compare
from db.store import Store


@dataclass
class RuntimeReport:
    head: Runtime                       # this build's measurement (ok or failed with its one line)
    base: Runtime | None = None         # the parent build's; None: not measured (or not built)
    diff: RuntimeDiff | None = None     # base -> head per order; None without a base measurement

    @property
    def disagreements(self) -> list[tuple[int, PathCheck]]:
        """(order, check) of this build's hot functions whose executed path is not their likely path."""
        return [(o.order, p) for o in self.head.orders for p in o.paths if not p.agree]

    def to_dict(self) -> dict:
        return {**self.head.to_dict(), "base": self.base.to_dict() if self.base else None,
                "comparison": self.diff.to_dict() if self.diff else None,
                "paths_disagree": [{"order": k, **p.to_dict()} for k, p in self.disagreements]}


def runtime_report(store: Store, build_id: int, base_build_id: int | None) -> RuntimeReport | None:
    """None when this build was not measured."""
    head = store.runtime_for(build_id)
    if head is None:
        return None
    base = store.runtime_for(base_build_id) if base_build_id is not None else None
    return RuntimeReport(head, base, compare(base, head) if base is not None else None)

"""The matrix page's rows (``/matrix/<sha>``): every function of a commit across its toolchains,
clone symbols summed into their source function, ranked by spread (largest minus smallest size).
One matrix per arch (sizes of two arches' code are not compared): its columns are the toolchains,
a ThinLTO build a column of its own (``clang-19 thinlto``).

Computed once when a commit's builds are written (``Store.record_build``, migration 0013), because
a stored build never changes afterwards and the page is asked for far more often than a commit is
built: a request then reads one page of stored rows instead of every symbol of 8 builds. The same
functions compute it per request for a commit stored before 0013, so both ways give the same rows.
"""
from __future__ import annotations

from dataclasses import dataclass

from analyzer.clones import parse
from db.models import MatrixRow
from toolchains.flavour import label_key

Cell = tuple  # (size, declared, out_of_line, inlined_count, symbols)


def table_key(target: str | None, arch: str = "x86_64") -> str:
    """A stored table's key (``matrix_tables.target``, 0013): the target ('' : every target) for
    x86_64, whose tables predate arches; ``ARCH:TARGET`` for the others (a target has no colon)."""
    return (target or "") if arch == "x86_64" else f"{arch}:{target or ''}"


@dataclass(frozen=True)
class MatrixLine:
    """One source function's row: its spread, whether the toolchains disagree, a cell per toolchain."""
    function: str
    spread: int
    differs: bool
    cells: dict[str, Cell]


@dataclass(frozen=True)
class MatrixTable:
    """A commit's matrix for one target ('' or None: every target): ``lines`` in page order."""
    toolchains: list[str]
    functions: int
    differing: int
    lines: list[MatrixLine]


def differs(row: MatrixRow) -> bool:
    vals = list(row.cells.values())
    return any((v[0], v[2], bool(v[3])) != (vals[0][0], vals[0][2], bool(vals[0][3])) for v in vals[1:])


def by_source_function(rows: list[MatrixRow]) -> tuple[list[MatrixRow], dict[str, dict[str, list[str]]]]:
    """Clone symbols (``foo.constprop.0``, ``foo.cold``...) summed into their source function's row, so a
    function gcc clones and clang does not compares as one; returns the rows and, per function and
    toolchain, the symbols that make up its size."""
    groups: dict[str, list[MatrixRow]] = {}
    for r in rows:
        groups.setdefault(parse(r.name).base, []).append(r)
    out, symbols = [], {}
    for base, members in groups.items():
        if len(members) == 1 and members[0].name == base:
            out.append(members[0])
            continue
        own = next((m for m in members if m.name == base), None)
        cells = {}
        for tc in {tc for m in members for tc in m.cells}:
            sizes = [m.cells[tc][0] for m in members if tc in m.cells and m.cells[tc][0] is not None]
            facts = own.cells.get(tc, (None,) * 4) if own else (None,) * 4
            cells[tc] = (sum(sizes) if sizes else None, facts[1], facts[2], facts[3])
            symbols.setdefault(base, {})[tc] = sorted(m.name for m in members
                                                      if tc in m.cells and m.cells[tc][0] is not None)
        out.append(MatrixRow(base, cells))
    return out, symbols


def rank(rows: list[MatrixRow]) -> MatrixTable:
    """Every row of ``Store.toolchain_matrix``, grouped by source function, widest spread first (then
    by name): the whole table, of which a page shows a slice."""
    grouped, symbols = by_source_function(rows)
    tcs = sorted({tc for r in grouped for tc in r.cells}, key=label_key)
    lines = []
    for r in grouped:
        sizes = [v[0] for v in r.cells.values() if v[0] is not None]
        cells = {}
        for tc in tcs:
            if tc in r.cells:
                size = r.cells[tc][0]
                syms = symbols.get(r.name, {}).get(tc, [r.name] if size else [])
                cells[tc] = (*r.cells[tc], syms)
        lines.append(MatrixLine(r.name, max(sizes) - min(sizes) if sizes else 0, differs(r), cells))
    lines.sort(key=lambda x: (-x.spread, x.function))
    return MatrixTable(tcs, len(grouped), sum(x.differs for x in lines), lines)


def page(table: MatrixTable, show_all: bool, limit: int, offset: int) -> MatrixTable:
    """The slice a page shows (the differing rows unless ``show_all``)."""
    lines = table.lines if show_all else [x for x in table.lines if x.differs]
    return MatrixTable(table.toolchains, table.functions, table.differing, lines[offset:offset + limit])

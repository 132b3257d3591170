"""Renderings of a size comparison: bloat-o-meter's exact text, and the extra views.

json and csv are imported where used: ``sizediff``'s default text output does
without them, and on small objects its run time is mostly start-up.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from analyzer.bloat import Comparison, Row
from analyzer.clones import parse


def bloat_text(tables: list[Comparison]) -> str:
    """Byte for byte what scripts/bloat-o-meter prints."""
    out = []
    for t in tables:
        out.append("add/remove: %s/%s grow/shrink: %s/%s up/down: %s/%s (%s)" %
                   (t.add, t.remove, t.grow, t.shrink, t.up, -t.down, t.up - t.down))
        out.append("%-40s %7s %7s %+7s" % (t.title, "old", "new", "delta"))
        for r in t.rows:
            out.append("%-40s %7s %7s %+7d" % (r.name, "-" if r.old is None else r.old,
                                               "-" if r.new is None else r.new, r.delta))
        out.append("Total: Before=%d, After=%d, chg %+.2f%%" % (t.old_total, t.new_total, t.percent))
    return "\n".join(out) + "\n"


@dataclass
class CloneGroup:
    """A source function with its clones: ``foo`` plus ``foo.part``, ``foo.constprop``, ``foo.cold``..."""
    base: str
    old: int | None
    new: int | None
    delta: int
    members: list[Row]


def clone_groups(table: Comparison) -> list[CloneGroup]:
    """Changed rows gathered under their source function, so "foo became foo.constprop" reads as a move.

    A group's old/new sizes include its unchanged members too.
    """
    groups: dict[str, list[Row]] = {}
    for r in table.rows:
        groups.setdefault(parse(r.name).base, []).append(r)
    members: dict[str, list[str]] = {}
    for name in table.old_sizes.keys() | table.new_sizes.keys():
        base = parse(name).base
        if base in groups:
            members.setdefault(base, []).append(name)
    out = []
    for base, rows in groups.items():
        names = members.get(base, [r.name for r in rows])
        olds = [table.old_sizes[n] for n in names if n in table.old_sizes]
        news = [table.new_sizes[n] for n in names if n in table.new_sizes]
        out.append(CloneGroup(base, sum(olds) if olds else None, sum(news) if news else None,
                              sum(r.delta for r in rows), rows))
    out.sort(key=lambda g: (g.delta, g.base), reverse=True)
    return out


def grouped_text(tables: list[Comparison]) -> str:
    out = []
    for t in tables:
        out.append("add/remove: %s/%s grow/shrink: %s/%s up/down: %s/%s (%s)" %
                   (t.add, t.remove, t.grow, t.shrink, t.up, -t.down, t.up - t.down))
        out.append("%-40s %7s %7s %+7s" % (t.title + " (clones grouped)", "old", "new", "delta"))
        for g in clone_groups(t):
            single = len(g.members) == 1 and g.members[0].name == g.base
            if not g.delta and not single and all(m.delta == 0 for m in g.members):
                continue
            if single:
                r = g.members[0]
                out.append("%-40s %7s %7s %+7d" % (r.name, _n(r.old), _n(r.new), r.delta))
                continue
            label = g.base + (" (moved)" if g.delta == 0 else "")
            out.append("%-40s %7s %7s %+7d" % (label, _n(g.old), _n(g.new), g.delta))
            for r in g.members:
                out.append("  %-38s %7s %7s %+7d" % (r.name, _n(r.old), _n(r.new), r.delta))
        out.append("Total: Before=%d, After=%d, chg %+.2f%%" % (t.old_total, t.new_total, t.percent))
    return "\n".join(out) + "\n"


def _n(v: int | None) -> str:
    return "-" if v is None else str(v)


def table_dict(t: Comparison) -> dict:
    keys = ("title", "add", "remove", "grow", "shrink", "up", "down", "old_total", "new_total")
    d = {k: getattr(t, k) for k in keys}
    d["rows"] = [asdict(r) for r in t.rows]
    d["net"] = t.net
    d["percent"] = round(t.percent, 4)
    return d


def to_json(tables: list[Comparison], extra: dict | None = None) -> str:
    doc = {"tables": [table_dict(t) for t in tables]}
    doc.update(extra or {})
    import json
    return json.dumps(doc, indent=2) + "\n"


def to_csv(tables: list[Comparison]) -> str:
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["table", "name", "old", "new", "delta"])
    for t in tables:
        for r in t.rows:
            w.writerow([t.title, r.name, _blank(r.old), _blank(r.new), r.delta])
        w.writerow([t.title, "TOTAL", t.old_total, t.new_total, t.new_total - t.old_total])
    return buf.getvalue()


def _blank(v: int | None) -> str:
    return "" if v is None else str(v)


def to_markdown(tables: list[Comparison]) -> str:
    out = []
    for t in tables:
        out.append(f"**{t.title}**: add/remove {t.add}/{t.remove}, grow/shrink {t.grow}/{t.shrink}, "
                   f"up/down {t.up}/-{t.down} ({t.net:+d})")
        out.append("")
        out.append(f"| {t.title.lower()} | old | new | delta |")
        out.append("|:---|---:|---:|---:|")
        for r in t.rows:
            out.append(f"| `{r.name}` | {_n(r.old)} | {_n(r.new)} | {r.delta:+d} |")
        out.append(f"| **total** | {t.old_total} | {t.new_total} | {t.new_total - t.old_total:+d} "
                   f"({t.percent:+.2f}%) |")
        out.append("")
    return "\n".join(out)

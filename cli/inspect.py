"""``sizewatch inspect OBJ``: one object's inline facts and findings (a thin layer over analyzer.inlines)."""
from __future__ import annotations

import click

from cli.common import one_line_errors
from cli.output import emit


@click.command("inspect")
@click.argument("obj")
@click.option("--source", "source", metavar="TREE", help="kernel source tree the object was built from "
              "(default: the paths recorded in DWARF)")
@click.option("--remarks", "remarks", multiple=True, metavar="FILE",
              help="compiler inline report: gcc -fopt-info-inline-* text or .json(.gz), clang .yaml or stderr")
@click.option("--cu", "cus", multiple=True, metavar="UNIT", help="only these compilation units (vmlinux), "
              "e.g. mm/page_alloc.c")
@click.option("--hot", "hot_file", metavar="FILE", help="hot-path list extending the allocator default")
@click.option("--all", "show_all", is_flag=True, help="list every function, not only inline/hot ones")
@click.option("--json", "as_json", is_flag=True, help="facts and findings as JSON")
def inspect(obj, source, remarks, cus, hot_file, show_all, as_json):
    """Inline decisions, out-of-line copies, callers and alignment of every function in OBJ."""
    from analyzer import hotpaths
    from analyzer.findings import findings
    from analyzer.inline_views import inspect_text
    from analyzer.inlines import analyze
    with one_line_errors():
        hot = hotpaths.load(hot_file)
        facts = analyze(obj, source, list(remarks), list(cus) or None)
        found = findings(facts, hot)
    if as_json:
        import json
        out = json.dumps({"facts": facts.to_dict(), "findings": [f.to_dict() for f in found]}, indent=1) + "\n"
    else:
        out = inspect_text(facts, found, hot, show_all)
    emit(out)

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
@click.option("--cost", is_flag=True, help="the likely path of each hot function: annotated disassembly, "
              "static measures and llvm-mca's estimated cycles")
@click.option("--function", "function", metavar="F", help="with --cost: only this function (any function)")
@click.option("--mcpu", metavar="CPU", help="with --cost: llvm-mca CPU model (default skylake-avx512)")
@click.option("--no-estimate", is_flag=True, help="with --cost: do not run llvm-mca")
def inspect(obj, source, remarks, cus, hot_file, show_all, as_json, cost, function, mcpu, no_estimate):
    """Inline decisions, out-of-line copies, callers and alignment of every function in OBJ."""
    if cost or function or mcpu or no_estimate:
        if not cost:
            raise click.UsageError("--function, --mcpu and --no-estimate go with --cost")
        # the likely path reads code and symbols only: refuse what it would silently ignore
        ignored = [o for o, given in (("--source", source), ("--remarks", remarks), ("--cu", cus),
                                      ("--all", show_all)) if given]
        if ignored:
            raise click.UsageError(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not go with --cost (the likely path reads code and "
                                   "symbols only)")
        if no_estimate and mcpu:
            raise click.UsageError("--mcpu and --no-estimate contradict each other")
        return _cost(obj, hot_file, function, mcpu, no_estimate, as_json)
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


def _cost(obj, hot_file, function, mcpu, no_estimate, as_json):
    from analyzer import hotpaths
    from analyzer.likely_path_cost import EstimateText, path_text
    from toolchains.mca import DEFAULT_MCPU, file_costs
    with one_line_errors():
        hot = hotpaths.load(hot_file)
        # the estimate is asked for explicitly by --mcpu: then a missing llvm-mca is an error
        paths, est, note = file_costs(obj, hot, function, None if no_estimate else (mcpu or DEFAULT_MCPU),
                                      required=mcpu is not None)
    if as_json:
        import json
        rows = []
        for p in paths:
            d = p.to_dict()
            e = est.get(p.function)
            d["estimate"] = e.to_dict() if e else None
            rows.append(d)
        out = json.dumps({"file": obj, "functions": rows, "estimate_note": note}, indent=1) + "\n"
    else:
        if not paths:
            out = f"{obj}: no hot functions (see --hot, or name one with --function)\n"
        else:
            blocks = []
            for p in paths:
                e = est.get(p.function)
                et = EstimateText(e.cycles, e.rthroughput, e.mcpu, e.modelled, e.call_latency) if e else None
                blocks.append(path_text(p, et, note))
            out = "\n".join(blocks)
    emit(out)

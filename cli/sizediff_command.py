"""The ``sizediff`` click command: every option, help and usage errors.

Reached through :func:`cli.sizediff.main`, which runs bloat-o-meter's
own command lines itself without importing click.
"""
from __future__ import annotations

import sys
from dataclasses import asdict

import click

from analyzer import bloat, formats
from analyzer.elf import load_images
from analyzer.errors import SizewatchError
from cli.common import run_standalone
from cli.output import emit_and_exit


def _pct(old: int, new: int) -> str:
    return "%+.2f%%" % ((new - old) * 100.0 / old) if old else "+0.00%"


def sections_text(old: dict[str, int], new: dict[str, int], title: str) -> list[str]:
    out = ["%-40s %9s %9s %+9s" % (title, "old", "new", "delta")]
    for name in sorted(old.keys() | new.keys(), key=lambda n: (-(new.get(n, 0) - old.get(n, 0)), n)):
        o, n = old.get(name), new.get(name)
        d = (n or 0) - (o or 0)
        out.append("%-40s %9s %9s %+9d" % (name, "-" if o is None else o, "-" if n is None else n, d))
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-c", "mode", flag_value="c", help="categorize output based on symbol type")
@click.option("-d", "mode", flag_value="d", help="Show delta of Data Section")
@click.option("-t", "mode", flag_value="t", help="Show delta of text Section")
@click.option("-p", "prefix", metavar="PREFIX",
              help="Arch prefix (accepted for bloat-o-meter compatibility; the ELF is read directly)")
@click.option("--no-weak", is_flag=True,
              help="bloat-o-meter 6.1 behaviour: weak symbols (wWvV) are not counted")
@click.option("--json", "fmt", flag_value="json", help="machine-readable rows and totals")
@click.option("--csv", "fmt", flag_value="csv", help="one CSV row per symbol, plus totals")
@click.option("--markdown", "fmt", flag_value="markdown", help="a table to paste")
@click.option("--group-clones", is_flag=True,
              help="show .part/.isra/.constprop/.cold clones under their source function")
@click.option("--split-cold", is_flag=True, help="hot text versus cold (.text.unlikely, .cold) text")
@click.option("--sections", "show_sections", is_flag=True,
              help="per-section totals like size(1): text/data/bss and every alloc section")
@click.option("--no-pfx", is_flag=True, help="leave out compiler-generated __pfx_/__cfi_ symbols")
@click.option("--inlines", is_flag=True, help="inline status changes and findings (needs DWARF)")
@click.option("--align", "align_view", is_flag=True,
              help="alignment units (the file's own: 16 bytes on x86-64, 16 with at most 11 of padding under "
                   "gcc arm64, 4 under clang arm64), cache lines and headroom of every function that changed size")
@click.option("--link", "link_view", is_flag=True,
              help="linked images (vmlinux): hot functions' addresses, cache lines and 64-byte phase, how far "
              "each moved and which functions before it caused the move")
@click.option("--source", metavar="TREE", help="with --inlines: kernel source tree for declarations")
@click.option("--cu", "cus", multiple=True, metavar="UNIT", help="with --inlines/--align/--inline-cost on vmlinux: "
              "only these compilation units, e.g. mm/page_alloc.c")
@click.option("--hot", "hot_file", metavar="FILE", help="with --inlines/--align/--link/--cost: hot-path list file")
@click.option("--cost", is_flag=True, help="likely-path cost of each hot function before/after/delta "
              "(instructions, bytes, branches, calls, pushes, frame, memory operands, 64-byte lines, "
              "llvm-mca estimated cycles)")
@click.option("--inline-cost", is_flag=True, help="bytes of every inlined callee before/after/delta, with the "
              "callers that changed, per declaring file (header) too (needs DWARF; --cu on vmlinux)")
@click.option("--mcpu", metavar="CPU", help="with --cost: llvm-mca CPU model (default skylake-avx512)")
@click.option("--no-estimate", is_flag=True, help="with --cost: do not run llvm-mca")
@click.argument("file1")
@click.argument("file2")
def command(mode, prefix, no_weak, fmt, group_clones, split_cold, show_sections, no_pfx, inlines, align_view,
            link_view, source, cus, hot_file, cost, inline_cost, mcpu, no_estimate, file1, file2):
    """Compare the symbol sizes of two object files (a drop-in scripts/bloat-o-meter)."""
    if (mcpu or no_estimate) and not cost:
        raise click.UsageError("--mcpu and --no-estimate go with --cost")
    if mcpu and no_estimate:
        raise click.UsageError("--mcpu and --no-estimate contradict each other")
    try:
        if split_cold:
            old, new = bloat.read_symbols(file1), bloat.read_symbols(file2)
            tables = bloat.diff(old, new, mode or "default", weak=not no_weak, skip_compiler=no_pfx)
        else:
            tables = bloat.diff_files(file1, file2, mode or "default", weak=not no_weak,
                                      skip_compiler=no_pfx)
        extra: dict = {}
        lines: list[str] = []
        if split_cold:
            so, sn = bloat.text_split(old, no_pfx), bloat.text_split(new, no_pfx)
            extra["text_split"] = {"old": asdict(so), "new": asdict(sn)}
            lines.append("Hot text: Before=%d, After=%d, chg %s" % (so.hot, sn.hot, _pct(so.hot, sn.hot)))
            lines.append("Cold text: Before=%d, After=%d, chg %s" % (so.cold, sn.cold, _pct(so.cold, sn.cold)))
        if show_sections:
            from analyzer.sections import section_sizes
            zo, zn = section_sizes(load_images(file1)), section_sizes(load_images(file2))
            extra["sections"] = {"old": asdict(zo), "new": asdict(zn)}
            berk = ("text", "data", "bss", "dec")
            lines += sections_text({k: getattr(zo, k) for k in berk}, {k: getattr(zn, k) for k in berk},
                                   "size")
            lines += sections_text(zo.alloc, zn.alloc, "section")
        if inlines or align_view:   # issue 3: inline decisions and alignment boundaries
            from analyzer import inline_views
            from analyzer.findings import compare
            from analyzer.hotpaths import load as load_hot
            from analyzer.inlines import analyze
            hot = load_hot(hot_file)
            fa, fb = analyze(file1, source, (), list(cus) or None), analyze(file2, source, (), list(cus) or None)
            if inlines:
                found, rows = compare(fa, fb, hot), inline_views.inline_changes(fa, fb)
                extra["inlines"] = {"findings": [f.to_dict() for f in found], "changes": rows}
                lines.append(inline_views.inline_changes_text(rows, found).rstrip("\n"))
            if align_view:
                arows = inline_views.align_changes(fa, fb, hot)
                extra["align"] = arows
                lines.append(inline_views.align_text(arows, fa.placed and fb.placed, fb.align).rstrip("\n"))
        if link_view:     # issue 13: hot functions at link addresses, and why they moved
            from analyzer import link_views
            from analyzer.findings import link_compare as link_findings
            from analyzer.hotpaths import load as load_hot
            from analyzer.link_layout import compare as compare_link, file_layout
            hot = load_hot(hot_file)
            (_, ta), (_, tb) = file_layout(file1, hot), file_layout(file2, hot)
            moves = compare_link(ta, tb, hot)
            found = link_findings(moves)
            extra["link"] = {"moves": [m.to_dict() for m in moves], "findings": [f.to_dict() for f in found]}
            lines += link_views.lines(moves, "  ", "old -> new")
            lines += [f"{f.kind}: {f.message}" for f in found]
        if inline_cost:   # issue 14: where inlined code lands
            from analyzer.inline_cost import inline_cost as read_cost
            from analyzer.inline_cost_diff import compare as compare_cost, diff_text
            units = list(cus) or None
            icd = compare_cost(read_cost(file1, units), read_cost(file2, units))
            extra["inline_cost"] = icd.to_dict()
            lines.append(diff_text(icd).rstrip("\n"))
        if cost:   # issue 15: the likely path's static cost per hot function
            from analyzer.likely_path_cost import cost_table_text
            from analyzer.hotpaths import load as load_hot
            from toolchains.mca import DEFAULT_MCPU, build_costs
            hot = load_hot(hot_file)
            cpu = None if no_estimate else (mcpu or DEFAULT_MCPU)
            ca, note = build_costs(file1, hot, cpu, required=mcpu is not None)
            cb, note_b = build_costs(file2, hot, cpu, required=mcpu is not None)
            from analyzer.likely_path_cost import compare_costs
            changes = compare_costs(ca, cb)
            extra["cost"] = {"mcpu": cpu, "estimate_note": note or note_b,
                             "functions": [c.to_dict() for c in changes]}
            text = cost_table_text(changes, cpu if not (note or note_b) else None)
            if note or note_b:
                text += f"est.cycles: {note or note_b}\n"
            lines.append(text.rstrip("\n"))
    except SizewatchError as e:
        click.echo(f"sizediff: {e}", err=True)
        sys.exit(1)
    if fmt == "json":
        if group_clones:
            extra["clone_groups"] = [[asdict(g) for g in formats.clone_groups(t)] for t in tables]
        out = formats.to_json(tables, extra)
    elif fmt == "csv":
        out = formats.to_csv(tables)
    elif fmt == "markdown":
        out = formats.to_markdown(tables)
    elif group_clones:
        out = formats.grouped_text(tables)
    else:
        out = formats.bloat_text(tables)
    if lines and fmt not in ("json",):
        out += "\n".join(lines) + "\n"
    emit_and_exit(out)


def main(args: list[str]) -> None:
    """Usage errors too are one line on stderr (exit 2), like every other error."""
    run_standalone(command, args, "sizediff")

"""``sizewatch measure BUILD_DIR``: boot a kernel a developer built and count the allocator's
executed instructions per alloc/free pair (a thin layer over toolchains.runtime.measure)."""
from __future__ import annotations

from pathlib import Path

import click

from cli.common import one_line_errors
from cli.output import emit


@click.command("measure")
@click.argument("build_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--orders", default="0-8", show_default=True, metavar="LIST",
              help="orders to measure: 0,4,8 or 0-8")
@click.option("-n", "--pairs", default=10000, show_default=True, metavar="N",
              help="alloc/free pairs counted per order")
@click.option("--toolchain", metavar="NAME", help="the toolchain the tree was built with (default: read from "
              "its .config), e.g. gcc-12 or clang-19")
@click.option("--vmlinux", type=click.Path(dir_okay=False, path_type=Path),
              help="the vmlinux to boot (default: BUILD_DIR/vmlinux)")
@click.option("--timeout", default=120.0, show_default=True, help="seconds the guest may take")
@click.option("--hot", "hot_file", metavar="FILE", help="hot-path list extending the allocator default "
              "(whose executed paths are compared with their static likely paths)")
@click.option("--functions", is_flag=True, help="every function per order, and where a hot function's "
              "executed path left its likely path")
@click.option("--json", "as_json", is_flag=True, help="the measurement as JSON")
def measure_cmd(build_dir, orders, pairs, toolchain, vmlinux, timeout, hot_file, functions, as_json):
    """Boot BUILD_DIR's vmlinux under QEMU TCG with a page_bench module and count, per order, the
    instructions the page allocator executes per alloc_pages + __free_pages pair."""
    from analyzer import hotpaths
    from analyzer.runtime_views import runtime_text
    from toolchains.runtime.measure import measure_vmlinux, parse_spec
    with one_line_errors():
        order_list, n = parse_spec(f"orders={orders},n={pairs}")
        if not build_dir.is_dir():
            raise click.UsageError(f"{build_dir}: no such build directory")
        image = vmlinux or build_dir / "vmlinux"
        if not image.is_file():
            raise click.UsageError(f"{image}: no vmlinux (build it, or give --vmlinux)")
        r = measure_vmlinux(build_dir, image, toolchain, order_list, n, timeout, hotpaths.load(hot_file))
    if as_json:
        import json
        emit(json.dumps(r.to_dict(), indent=1) + "\n")
    else:
        emit(runtime_text(r, functions))
    return 0 if r.status == "ok" else 1

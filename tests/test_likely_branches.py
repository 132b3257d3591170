"""The likely path's branch choices (analyzer.likely_path) against the executed path.

Oracle: the allocator vmlinux of the example series' base, booted under QEMU TCG with the
benchmark module (orders 0 and 4, 1000 alloc/free pairs each) and the runtime plugin counting
every executed instruction in the measured loop; ``tests/branch_oracle.py`` splits each
conditional branch's executions into taken / not taken from those counts and objdump's listing.
For every hot function called on every pair, every ``jcc`` on its likely path is compared with
the side the loop took more often, where the oracle is decisive (the branch executed, the counts
split its edges, the sides not tied).

Disagreements are findings about the layout heuristic, listed here exactly: in each, the
compiler laid the hot side out as the jump, so "fall-through is likely" reads it wrong. The
source lines are gcc-12's / clang-19's DWARF for the branch (addr2line -i). Offsets are from the
function's entry, the same in the vmlinux and in that build's mm/page_alloc.o.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analyzer.likely_path import hot_likely_paths
from analyzer.runtime import parse_counts
from branch_oracle import Listing, edges

PAIRS = 1000
ORDERS = (0, 4)

# (order, function, offset, mnemonic): the side the loop took; the likely path always says "fall"
EXPECTED = {
    "gcc-12": {
        (0, "free_unref_page_commit", 0x71, "je"): "taken",      # nr_pcp_high(), page_alloc.c:3459
        (0, "free_pcp_prepare", 0x53, "je"): "taken",            # free_pages_prepare(), :1475
        (0, "free_unref_page", 0x57, "jne"): "taken",            # free_unref_page_prepare(), :3414
        (0, "__free_pages", 0x13, "je"): "taken",                # put_page_testzero(), :5746
        (0, "get_page_from_freelist", 0x207, "je"): "taken",     # :4285
        (0, "get_page_from_freelist", 0x23b, "je"): "taken",     # :4295
        (0, "get_page_from_freelist", 0x293, "je"): "taken",     # zone_watermark_fast(), :4126
        (0, "__alloc_pages", 0x57, "je"): "taken",               # :5634
        (0, "__alloc_pages", 0xe8, "jne"): "taken",              # might_alloc(), sched/mm.h:274
        (4, "__free_one_page", 0xa6, "je"): "taken",             # compaction_capture(), :992
        (4, "__free_pages_ok", 0x8e, "jne"): "taken",            # free_pages_prepare(), :1455
        (4, "__free_pages_ok", 0x9d, "je"): "taken",             # free_pages_prepare(), :1475
        (4, "__free_pages", 0x13, "je"): "taken",
        (4, "get_page_from_freelist", 0x207, "je"): "taken",
        (4, "get_page_from_freelist", 0x23b, "je"): "taken",
        (4, "get_page_from_freelist", 0x2b1, "jne"): "taken",    # zone_watermark_fast(), :4139
        (4, "get_page_from_freelist", 0x511, "je"): "taken",     # zone_statistics() in rmqueue_buddy(), :3734
        (4, "get_page_from_freelist", 0x575, "jne"): "taken",    # prep_new_page(), :2569
        (4, "__alloc_pages", 0x57, "je"): "taken",
        (4, "__alloc_pages", 0xe8, "jne"): "taken",
    },
    "clang-19": {
        (0, "__alloc_pages", 0x3d, "jb"): "taken",              # :5634
        (0, "__alloc_pages", 0x140, "jne"): "taken",            # alloc_flags_nofragment(), :4208
        (0, "__free_pages", 0x16, "jb"): "taken",               # :780 (put_page_testzero's atomic)
        (0, "__rmqueue_pcplist", 0x27, "jne"): "taken",         # :3802
        (0, "free_unref_page_prepare", 0x52, "je"): "taken",    # free_pages_prepare(), :1475
        (0, "free_unref_page_prepare", 0xa1, "jne"): "taken",   # free_pages_prepare(), :1514
        (0, "get_page_from_freelist", 0x146, "jne"): "taken",   # :4285
        (0, "get_page_from_freelist", 0x189, "je"): "taken",    # :4295
        (0, "get_page_from_freelist", 0x1e2, "je"): "taken",    # zone_watermark_fast(), :4126
        (0, "get_page_from_freelist", 0xf7b, "jne"): "taken",   # :4357
        (0, "prep_new_page", 0xdb, "jne"): "taken",             # :2569
        (4, "__alloc_pages", 0x3d, "jb"): "taken",
        (4, "__alloc_pages", 0x140, "jne"): "taken",
        (4, "__free_one_page", 0xc5, "je"): "taken",            # compaction_capture(), :992
        (4, "__free_one_page", 0x107, "jne"): "taken",          # find_buddy_page_pfn(), internal.h:304
        (4, "__free_pages", 0x1b, "jne"): "taken",              # :780
        (4, "__free_pages_ok", 0xa5, "jne"): "taken",           # free_pages_prepare(), :1455
        (4, "__free_pages_ok", 0xb6, "je"): "taken",            # free_pages_prepare(), :1475
        (4, "__free_pages_ok", 0x10e, "je"): "taken",           # free_pages_prepare(), :1481
        (4, "get_page_from_freelist", 0x146, "jne"): "taken",
        (4, "get_page_from_freelist", 0x189, "je"): "taken",
        (4, "get_page_from_freelist", 0x220, "jae"): "taken",   # rmqueue(), :3893
        (4, "get_page_from_freelist", 0xf7b, "jne"): "taken",
        (4, "prep_new_page", 0xdb, "jne"): "taken",
    },
}
# how many likely-path branches the oracle decided, per order (of which the above disagree)
DECIDED = {"gcc-12": {0: 33, 4: 50}, "clang-19": {0: 45, 4: 46}}
# the hot functions called on every pair, per order: those whose branches are compared
CHECKED = {
    "gcc-12": {0: {"__alloc_pages", "get_page_from_freelist", "free_unref_page", "free_unref_page_commit",
                   "free_pcp_prepare", "__free_pages"},
               4: {"__alloc_pages", "get_page_from_freelist", "__free_pages", "__free_pages_ok",
                   "__free_one_page"}},
    "clang-19": {0: {"__alloc_pages", "get_page_from_freelist", "__rmqueue_pcplist", "prep_new_page",
                     "free_unref_page", "free_unref_page_prepare", "free_unref_page_commit", "__free_pages"},
                 4: {"__alloc_pages", "get_page_from_freelist", "prep_new_page", "__free_pages",
                     "__free_pages_ok", "__free_one_page"}},
}


def guest_files(toolchain: str, work: Path, params: str) -> Path:
    """The base commit's allocator vmlinux copied into ``work``, and beside it the initramfs with
    the benchmark module (built against that vmlinux's build dir) and ``params``."""
    from kernel_images import CONFIG, allocator_vmlinux
    from toolchains.build import BuildOptions, layout
    from toolchains.locks import file_lock
    from toolchains.registry import load
    from toolchains.runtime import guest
    images = allocator_vmlinux(toolchain, 1)
    image = work / "vmlinux"
    shutil.copyfile(images.vmlinux[0], image)
    lay = layout(images.tree, toolchain, CONFIG, BuildOptions())
    with file_lock(lay.worktree_lock), file_lock(lay.lock):      # the shared build dir: no build meanwhile
        ko = guest.build_module(lay.build_dir, load(toolchain), work)
    guest.initramfs(work / "i.cpio", ko, params)
    return image


def measured_counts(toolchain: str, work: Path) -> tuple[Path, dict[int, dict[int, tuple[int, int]]]]:
    """The vmlinux and the plugin's per-address counts of each order's loop."""
    from toolchains.runtime import qemu
    image = guest_files(toolchain, work, f"orders={','.join(map(str, ORDERS))} pairs={PAIRS}")
    run = qemu.boot(image, work / "i.cpio", work, 300)
    assert run.ended == "done", run.console[-2000:]
    return image, {w.order: w.counts for w in parse_counts(run.counts, PAIRS)}


def verdicts(image: Path, windows: dict[int, dict[int, tuple[int, int]]]):
    """Per order: the functions checked, the branches decided, and the disagreements
    {(order, function, offset, mnemonic): the side the loop took}."""
    paths = hot_likely_paths(str(image))
    listing = Listing(image, {p.function.split(".")[0] for p in paths})
    assert listing.indirect_jumps == []         # no jump table: direct jumps are the only ways in
    checked: dict[int, set[str]] = {}
    decided: dict[int, int] = {}
    disagree: dict[tuple[int, str, int, str], str] = {}
    for order, counts in windows.items():
        checked[order], decided[order] = set(), 0
        for p in paths:
            if counts.get(p.start, (0, 0))[0] < PAIRS:
                continue                    # not called on every pair: not on this loop's fast path
            checked[order].add(p.function)
            for ins in p.instructions:
                if ins.kind != "jcc":
                    continue
                assert listing.is_jcc(ins.address), (p.function, hex(ins.address), ins.mnemonic)
                hot = edges(listing, counts, ins.address).hot
                if hot is None:
                    continue
                decided[order] += 1
                likely = "taken" if ins.taken else "fall"
                if hot != likely:
                    disagree[(order, p.function, ins.address - p.start, ins.mnemonic)] = hot
    return checked, decided, disagree


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.parametrize("toolchain", ["gcc-12", "clang-19"])
def test_likely_branches_are_the_executed_ones(toolchain, tmp_path):
    image, windows = measured_counts(toolchain, tmp_path)
    assert sorted(windows) == list(ORDERS)
    checked, decided, disagree = verdicts(image, windows)
    print(toolchain, checked, decided, sorted(disagree.items()))
    assert checked == CHECKED[toolchain]
    assert decided == DECIDED[toolchain]
    assert disagree == EXPECTED[toolchain]


@pytest.mark.kernel
@pytest.mark.slow
def test_branch_oracle_agrees_with_qemus_exec_log(tmp_path):
    """The oracle's premise checked on one boot: QEMU runs one instruction per translation block
    and logs each (``-singlestep -d exec,nochain``, filtered to gcc-12's checked functions) while
    the plugin counts the whole run; the log's consecutive instructions are the executed edges.
    Every branch the counts decide has exactly the log's taken and not-taken counts."""
    from analyzer.runtime import parse_counts
    from toolchains.runtime import qemu
    names = set().union(*CHECKED["gcc-12"].values())
    image = guest_files("gcc-12", tmp_path, "orders=0,4 pairs=50 warmup=10")
    nm = subprocess.run(["nm", "-S", str(image)], capture_output=True, text=True, check=True).stdout
    ranges = [f"0x{a}+0x{size}" for a, size, _, name in (ln.split() for ln in nm.splitlines() if ln.count(" ") == 3)
              if name.split(".")[0] in names]
    assert len(ranges) >= len(names)
    log = tmp_path / "exec.log"
    run = qemu.boot(image, tmp_path / "i.cpio", tmp_path, 600, whole=True,
                    extra=("-singlestep", "-d", "exec,nochain", "-dfilter", ",".join(ranges), "-D", str(log)))
    assert run.ended == "done", run.console[-2000:]
    (window,) = parse_counts(run.counts, 1)
    executed: list[int] = []
    line = re.compile(r"^(Trace|Stopped)[^\[]*\[([0-9a-f]+)(?:/([0-9a-f]+))?")
    with log.open(errors="replace") as f:
        for text in f:
            m = line.match(text)
            if m and m.group(1) == "Trace":
                executed.append(int(m.group(3), 16))
            elif m:                             # the block logged last did not run after all
                assert executed[-1] == int(m.group(2), 16), text
                executed.pop()
    taken: dict[tuple[int, int], int] = {}
    for a, b in zip(executed, executed[1:]):
        taken[(a, b)] = taken.get((a, b), 0) + 1
    listing = Listing(image, names)
    ran = decided = 0
    for a in (a for a in listing.mnemonic if listing.is_jcc(a)):
        e = edges(listing, window.counts, a)
        ran += bool(e.executed)
        if e.taken is None:
            continue
        assert (e.taken, e.fall) == (taken.get((a, listing.target[a]), 0), taken.get((a, listing.next[a]), 0)), hex(a)
        decided += bool(e.executed)
    assert (ran, decided) == (131, 124)        # branches of these functions that ran (boot included), decided

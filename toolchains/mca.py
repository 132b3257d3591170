"""Estimated cycles of likely paths from llvm-mca (Debian's llvm-19): a static model, not a measurement.

All paths of one build go to one llvm-mca process, one ``# LLVM-MCA-BEGIN name`` region per
function. llvm-mca simulates a straight-line sequence, so the path's instructions are given as
it ran them: branch and call targets are replaced by one undefined label (llvm-mca ignores
program-counter updates; a jump is just its uops), and calls cost llvm-mca's fixed call latency
(100 cycles unless ``call_latency`` says otherwise): the callee's body is not in the estimate.
One iteration: "Total Cycles" is one pass through the path from an empty pipeline.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass

from analyzer.errors import SizewatchError
from analyzer.likely_path import LikelyPath

DEFAULT_MCPU = "skylake-avx512"
DEFAULT_MCPU_AARCH64 = "neoverse-n1"       # an arm64 path asked for with the (x86) default CPU gets this
TRIPLES = {"x86_64": "x86_64-unknown-linux-gnu", "aarch64": "aarch64-unknown-linux-gnu"}
_A64_DIRECT = ("b", "bl", "cbz", "cbnz", "tbz", "tbnz")
MCA = "llvm-mca-19"
DEFAULT_CALL_LATENCY = 100     # llvm-mca's own default


class McaError(SizewatchError):
    """llvm-mca is missing or refused the input/CPU."""


@dataclass(frozen=True)
class Estimate:
    """llvm-mca's estimate for one likely path on one CPU model."""
    function: str
    mcpu: str
    cycles: int               # "Total Cycles" of one iteration
    rthroughput: float        # "Block RThroughput": steady-state cycles per pass, if repeated
    uops: int
    modelled: int             # instructions llvm-mca accepted (of the path's)
    call_latency: int

    def to_dict(self) -> dict:
        return {"function": self.function, "mcpu": self.mcpu, "estimated_cycles": self.cycles,
                "block_rthroughput": self.rthroughput, "uops": self.uops,
                "modelled_instructions": self.modelled, "call_latency": self.call_latency,
                "kind": "estimate (llvm-mca static model), not a measurement"}


_LABEL = ".Lsizewatch_target"
_SAFE = re.compile(r"[^A-Za-z0-9_.$]")


def mca_source(paths: list[LikelyPath]) -> str:
    """The assembly llvm-mca reads: one region per path, AT&T syntax, branch targets made labels."""
    out = []
    for p in paths:
        out.append(f"# LLVM-MCA-BEGIN {_SAFE.sub('_', p.function)}")
        if p.arch == "aarch64":
            for i in p.instructions:
                ops = i.operands
                if i.mnemonic in _A64_DIRECT or i.mnemonic.startswith("b."):
                    # the target is the last operand (b/bl/b.cond: the only one)
                    ops = ", ".join([*[o.strip() for o in ops.split(",")[:-1]], _LABEL])
                out.append(f"{i.mnemonic} {ops}".rstrip())
            out.append(f"# LLVM-MCA-END {_SAFE.sub('_', p.function)}")
            continue
        for i in p.instructions:
            ops = i.operands
            if i.kind in ("jcc", "jmp", "call", "tail", "ret", "alt") and ops and not ops.startswith("*"):
                ops = _LABEL
            if i.kind == "ret" and i.mnemonic.startswith("j"):
                out.append("retq")          # jmp __x86_return_thunk: a return
                continue
            out.append(f"{i.mnemonic} {ops}".rstrip())
        out.append(f"# LLVM-MCA-END {_SAFE.sub('_', p.function)}")
    return "\n".join(out) + "\n"


def estimate(paths: list[LikelyPath], mcpu: str = DEFAULT_MCPU,
             call_latency: int = DEFAULT_CALL_LATENCY, timeout: float = 60) -> dict[str, Estimate]:
    """Estimated cycles per function name, from one llvm-mca run over all ``paths``."""
    if not paths:
        return {}
    arches = {p.arch for p in paths}
    if len(arches) != 1 or not arches <= set(TRIPLES):
        raise McaError(f"cannot estimate paths of {', '.join(sorted(arches))} in one run")
    arch = arches.pop()
    exe = shutil.which(MCA)
    if exe is None:
        raise McaError(f"{MCA} not found: cycle estimates need Debian's llvm-19 (scripts/install.sh installs it)")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", mcpu):
        raise McaError(f"bad CPU name {mcpu!r} (e.g. skylake-avx512, znver3)")
    cmd = [exe, f"-mcpu={mcpu}", f"-mtriple={TRIPLES[arch]}", "-iterations=1", "--json",
           f"--call-latency={call_latency}", "--skip-unsupported-instructions=any", "-"]
    try:
        proc = subprocess.run(cmd, input=mca_source(paths), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise McaError(f"{MCA} took more than {timeout:.0f} s") from None
    if "is not a recognized processor" in proc.stderr:
        raise McaError(f"{MCA}: unknown CPU {mcpu!r} (llvm-mca-19 -mcpu=help lists them)")
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:200])
        raise McaError(f"{MCA} failed: {first}")
    try:
        regions = json.loads(proc.stdout)["CodeRegions"]
    except (ValueError, KeyError):
        raise McaError(f"{MCA}: unreadable output") from None
    out: dict[str, Estimate] = {}
    for p, r in zip(paths, regions):
        s = r["SummaryView"]
        out[p.function] = Estimate(p.function, mcpu, int(s["TotalCycles"]), float(s["BlockRThroughput"]),
                                   int(s["TotaluOps"]), int(s["Instructions"]), call_latency)
    return out


def check_cpu(mcpu: str, timeout: float = 30) -> None:
    """Refuse a CPU name llvm-mca does not know before any build is spent on it (a bad name would
    otherwise surface only after the first build). Without llvm-mca, only the spelling is checked:
    the builds then store no estimates and say why."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", mcpu or ""):
        raise McaError(f"bad CPU name {mcpu!r} (e.g. skylake-avx512, znver3)")
    exe = shutil.which(MCA)
    if exe is None:
        return
    try:
        proc = subprocess.run([exe, f"-mcpu={mcpu}", "-mtriple=x86_64-unknown-linux-gnu", "-"], input="nop\n",
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise McaError(f"{MCA} took more than {timeout:.0f} s") from None
    if "is not a recognized processor" in proc.stderr:
        raise McaError(f"{MCA}: unknown CPU {mcpu!r} (llvm-mca-19 -mcpu=help lists them)")


def file_costs(path: str, hot=None, function: str | None = None, mcpu: str | None = DEFAULT_MCPU,
               required: bool = True):
    """Likely paths of the hot functions (or one function) of an object or linked file, with
    llvm-mca's estimate when ``mcpu`` is given: (paths, {function: Estimate}, note).

    Without llvm-mca and ``required`` false, the estimates are empty and ``note`` says why."""
    from analyzer.likely_path import hot_likely_paths, likely_path
    paths = [likely_path(path, function)] if function else hot_likely_paths(path, hot)
    if mcpu is None:
        return paths, {}, "not asked for"
    if mcpu == DEFAULT_MCPU and paths and paths[0].arch == "aarch64":
        mcpu = DEFAULT_MCPU_AARCH64
    try:
        return paths, estimate(paths, mcpu), None
    except McaError as e:
        if required or shutil.which(MCA) is not None:
            raise
        return paths, {}, str(e)


def build_costs(path: str, hot=None, mcpu: str | None = DEFAULT_MCPU, required: bool = True):
    """(FunctionCost per hot function, note): what a build stores and what sizediff --cost compares."""
    from analyzer.likely_path_cost import FunctionCost
    paths, est, note = file_costs(path, hot, None, mcpu, required)
    out = []
    for p in paths:
        e = est.get(p.function)
        out.append(FunctionCost.of(p, e.cycles if e else None, e.rthroughput if e else None, e.mcpu if e else None))
    return out, (None if note == "not asked for" else note)

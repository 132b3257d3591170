"""Patchwork-style checks: one JSON file per patch with the fields patchwork's checks API
takes (state, context, description, target_url), plus the patch's Message-ID so a
forwarder can find the patch in patchwork. Files are replaced atomically and carry no
time stamp, so writing them again after a restart changes nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ci.reports.model import PatchReport, Reportable

STATES = ("pending", "success", "warning", "fail")
CONTEXT = "sizewatch"


@dataclass(frozen=True)
class Check:
    msgid: str
    state: str                       # pending | success | warning | fail
    context: str
    description: str
    target_url: str

    def to_dict(self) -> dict:
        return asdict(self)


def _describe(items: list[Reportable]) -> str:
    per: dict[str, dict[str, int]] = {}
    for r in items:
        per.setdefault(r.toolchain or "series", {}).setdefault(r.kind.replace("_", " "), 0)
        per[r.toolchain or "series"][r.kind.replace("_", " ")] += 1
    return "; ".join(f"{tc}: " + ", ".join(f"{k} x{n}" if n > 1 else k for k, n in kinds.items())
                     for tc, kinds in per.items())


def patch_check(p: PatchReport, message_id: str, items: list[Reportable], toolchains: list[str],
                dashboard_url: str, series_url: str, blocked: str = "") -> Check:
    """The check of one patch: ``blocked`` says why it was not built (an earlier patch did not apply)."""
    mine = [r for r in items if r.position == p.position]
    if p.commit is None or blocked:
        why = p.error if p.status == "failed" else (blocked or p.error or "not applied")
        state = "fail" if p.status == "failed" else "warning"
        return Check(message_id, state, CONTEXT, f"not built: {why}"[:250], series_url)
    url = f"{dashboard_url}/commit/{p.commit.sha}"
    if any(r.kind.startswith("build_error") for r in mine):
        return Check(message_id, "fail", CONTEXT, _describe(mine)[:250], url)
    if mine:
        return Check(message_id, "warning", CONTEXT, _describe(mine)[:250], url)
    return Check(message_id, "success", CONTEXT, f"no size or inlining findings ({', '.join(toolchains)})", url)


def check_path(directory: Path, message_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._@+-]", "_", message_id.strip("<>"))[:120]
    digest = hashlib.sha256(message_id.encode()).hexdigest()[:8]
    return directory / f"{safe}.{digest}.json"


def write_check(directory: Path, check: Check) -> Path:
    """Atomically (re)write the check's JSON file; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = check_path(directory, check.msgid)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(check.to_dict(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path

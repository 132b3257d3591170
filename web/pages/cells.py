"""One dashboard cell: a commit's builds under one toolchain, arch and LTO mode (all its targets) against
the parent's, from ``Store.build_summaries``; and a series' column of such cells summed up. A column is
a toolchain's label (``toolchains.flavour``: ``gcc-12``, ``gcc-12 arm64``, ``clang-19 thinlto``): builds of
two arches are never added up into one cell."""
from __future__ import annotations

from analyzer.kinds import severity_rank
from db.models import BuildSummary, FindingRow
from toolchains.flavour import label, label_key, lto_of_key, matches

_STATUS_RANK = {"killed": 0, "timeout": 1, "failed": 2, "ok": 3}


def _worst(findings: list[FindingRow]) -> FindingRow | None:
    if not findings:
        return None
    return min(findings, key=lambda f: (severity_rank(f.severity), f.base_build_id is None, f.kind,
                                        f.function))


def _brief(f: FindingRow | None) -> dict | None:
    return None if f is None else {"kind": f.kind, "function": f.function, "severity": f.severity or "info",
                                   "message": f.message, "change": f.base_build_id is not None}


def cell(summaries: list[BuildSummary]) -> dict:
    """Worst build status, summed text sizes and deltas, finding counts and the worst finding."""
    if len(summaries) == 1:             # one target: nearly every cell (a page has ~500): nothing to add up
        (s,) = summaries
        status, severities, kinds = s.status, s.severities, dict(s.kinds)
        base = "not built" if s.base_status is None else s.base_status
        worst = s.worst
    else:
        status = min((s.status for s in summaries), key=lambda st: _STATUS_RANK.get(st, -1))
        severities, kinds = {}, {}
        for s in summaries:
            for k, n in s.severities.items():
                severities[k] = severities.get(k, 0) + n
            for k, n in s.kinds.items():
                kinds[k] = kinds.get(k, 0) + n
        base = "not built" if any(s.base_status is None for s in summaries) else \
            min((s.base_status for s in summaries), key=lambda st: _STATUS_RANK.get(st, -1))
        worst = _worst([s.worst for s in summaries if s.worst])
    deltas = [s.text_delta for s in summaries]
    return {
        "status": status,
        "build_ids": [s.build_id for s in summaries],
        "targets": [s.target for s in summaries],
        "text": None if any(s.text is None for s in summaries) else sum(s.text for s in summaries),
        "text_delta": None if any(d is None for d in deltas) else sum(deltas),
        "base": base,
        "findings": sum(severities.values()),
        "severities": dict(sorted(severities.items(), key=lambda kv: severity_rank(kv[0]))),
        "kinds": kinds,
        "carried": sum(s.carried for s in summaries),
        "worst": _brief(worst),
        "error": next((e for s in summaries for e in s.errors), None) if status != "ok" else None,
    }


def column(cells: list[dict], not_applied: int = 0) -> dict:
    """A series under one toolchain: failed builds, summed text delta, all findings, the worst one."""
    worst = [c["worst"] for c in cells if c["worst"]]
    severities: dict[str, int] = {}
    for c in cells:
        for k, n in c["severities"].items():
            severities[k] = severities.get(k, 0) + n
    deltas = [c["text_delta"] for c in cells]
    return {
        "patches": len(cells),
        "failed_builds": sum(1 for c in cells if c["status"] != "ok"),
        "not_applied": not_applied,
        "text_delta": sum(d for d in deltas if d is not None) if any(d is not None for d in deltas) else None,
        "findings": sum(c["findings"] for c in cells),
        "severities": dict(sorted(severities.items(), key=lambda kv: severity_rank(kv[0]))),
        "worst": min(worst, key=lambda w: (severity_rank(w["severity"]), not w["change"], w["kind"]))
        if worst else None,
    }


def by_commit(summaries: list[BuildSummary], arch: str | None = None,
              lto: str | None = None) -> dict[str, dict[str, dict]]:
    """{sha: {label: cell}} with labels in display order; only the builds of ``arch`` and ``lto``
    (``?arch=``, ``?lto=``; None: all)."""
    grouped: dict[str, dict[str, list[BuildSummary]]] = {}
    for s in summaries:
        if matches(s.arch, s.config_key, arch, lto):
            grouped.setdefault(s.commit_sha, {}).setdefault(label(s.toolchain, s.arch, lto_of_key(s.config_key)),
                                                             []).append(s)
    return {sha: {tc: cell(tcs[tc]) for tc in sorted(tcs, key=label_key)} for sha, tcs in grouped.items()}


def toolchains_of(cells_by_sha: dict[str, dict[str, dict]]) -> list[str]:
    return sorted({tc for cells in cells_by_sha.values() for tc in cells}, key=label_key)


def filter_links(arch: str | None, lto: str | None, keep: dict[str, str | None] | None = None) -> list[dict]:
    """The ``?arch=``/``?lto=`` choices a page offers, each a link keeping the page's other query
    parameters (``keep``) and the other filter: ``{"what", "value", "url", "current"}``."""
    from urllib.parse import urlencode

    from toolchains.flavour import LTO_MODES
    from toolchains.registry import ARCHES
    out = []
    for what, values, now in (("arch", ARCHES, arch), ("lto", LTO_MODES, lto)):
        for value in (None, *values):
            q = {**{k: v for k, v in (keep or {}).items() if v}, "arch": arch, "lto": lto, what: value}
            query = urlencode({k: v for k, v in q.items() if v})
            out.append({"what": what, "value": value or "all", "url": f"?{query}" if query else "?",
                        "current": value == now})
    return out

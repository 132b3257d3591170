"""The analyzer's inline facts and findings, as store rows.

Adapter over analyzer.inlines / analyzer.findings (the inline-decisions issue).
Until those modules exist the pipeline stores symbols and sections only, with
``analysis_version`` 0, and a later run analyzes those builds again from the
cached objects (no rebuild).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from db.models import FindingRow, FunctionRow, RemarkRow

# Bump when what the analyzer stores changes: builds analyzed by an older version are analyzed again.
ANALYSIS_VERSION = 0


@dataclass
class Analysis:
    functions: list[FunctionRow] = field(default_factory=list)
    remarks: list[RemarkRow] = field(default_factory=list)
    findings: list[FindingRow] = field(default_factory=list)
    facts: dict | None = None
    note: str = ""


def available() -> bool:
    return False


def analyze(path: Path, source_root: Path | None, remarks: list[Path]) -> Analysis:
    return Analysis(note="inline analysis not available in this version")


def compare(base_facts: dict, head_facts: dict) -> list[FindingRow]:
    return []

"""The compilers' own inlining reports, as plain records.

Formats read (detected from the content, not the name):
- gcc ``-fopt-info-inline-missed=FILE`` / ``-fopt-info-inline-all=FILE`` text,
- gcc ``-fsave-optimization-record`` JSON (``.json`` or ``.json.gz``),
- clang ``-fsave-optimization-record`` YAML (``--- !Missed`` / ``!Passed`` documents),
- clang ``-Rpass-missed=inline`` / ``-Rpass=inline`` stderr.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from analyzer.errors import InputError
from analyzer.files import gunzip, read_input

PASSED = "inlined"
MISSED = "not_inlined"


@dataclass(frozen=True)
class Remark:
    callee: str
    caller: str | None
    decision: str              # 'inlined' | 'not_inlined'
    reason: str = ""           # the compiler's words, e.g. "--param max-inline-insns-single limit reached"
    location: str = ""         # file:line:col of the call
    compiler: str = ""         # 'gcc' | 'clang'
    stage: str = ""            # gcc: 'early' for the early inliner's verdicts; clang: remark name

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Remark":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


_NODE = r"([A-Za-z_$][\w.$]*)/\d+"
_GCC_EDGE = re.compile(rf"{_NODE}\s*->\s*{_NODE}(?:,\s*(.*))?$")
_GCC_INLINING = re.compile(rf"Inlin(?:ing|ed) {_NODE} into {_NODE}")
_GCC_LINE = re.compile(r"^(?:(?P<loc>[^\s:][^:]*:\d+:\d+|[^\s:][^:]*:\d+|<unknown>): )?"
                       r"(?P<kind>missed|optimized|note):\s+(?P<msg>.*)$")   # no location for IPA clones
_CLANG_RPASS = re.compile(r"^(?P<loc>\S+:\d+:\d+): remark: '(?P<callee>[^']+)' (?P<what>not inlined|inlined) "
                          r"into '(?P<caller>[^']+)'(?P<rest>.*?)(?:\s*\[-Rpass(?:-missed)?=inline\])?$")


def _gcc_message(kind: str, msg: str, loc: str) -> Remark | None:
    msg = msg.strip()
    if kind == "optimized" or kind == "success":
        m = _GCC_INLINING.search(msg)
        if m:
            return Remark(m.group(1), m.group(2), PASSED, "", loc, "gcc")
        return None
    if kind not in ("missed", "failure"):
        return None
    m = _GCC_EDGE.search(msg)
    if not m:
        return None
    head = msg[:m.start()].rstrip(": ").strip()
    reason = (m.group(3) or head).strip().rstrip(".")
    stage = "early" if "early inline" in head else ""
    return Remark(m.group(2), m.group(1), MISSED, reason, loc, "gcc", stage)


def parse_gcc_text(text: str) -> list[Remark]:
    out = []
    for line in text.splitlines():
        m = _GCC_LINE.match(line)
        if m:
            r = _gcc_message(m.group("kind"), m.group("msg"), m.group("loc") or "")
            if r:
                out.append(r)
    return out


def _walk(recs):
    for r in recs:
        if isinstance(r, dict):
            yield r
            yield from _walk(r.get("children", ()))


def parse_gcc_json(doc) -> list[Remark]:
    if not (isinstance(doc, list) and len(doc) >= 3 and isinstance(doc[0], dict) and "generator" in doc[0]):
        raise InputError("not a gcc optimization record (expected [metadata, passes, records])")
    out = []
    for r in _walk(doc[2]):
        msg = "".join(p if isinstance(p, str) else str(p.get("symtab_node", p.get("expr", "")))
                      for p in r.get("message", ()))
        loc = r.get("location") or {}
        where = f"{loc.get('file', '')}:{loc.get('line', '')}:{loc.get('column', '')}" if loc else ""
        rem = _gcc_message(r.get("kind", ""), msg, where)
        if rem:
            out.append(rem)
    return out


def parse_clang_yaml(text: str) -> list[Remark]:
    import yaml

    class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml: ~20x faster
        pass

    for tag in ("!Missed", "!Passed", "!Analysis", "!Failure", "!AnalysisFPCommute", "!AnalysisAliasing"):
        _Loader.add_constructor(tag, lambda loader, node, t=tag: {"_kind": t[1:], **loader.construct_mapping(node, deep=True)})
    out = []
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        raise InputError(f"corrupt clang optimization record ({str(e).splitlines()[0]})") from None
    for d in docs:
        if not isinstance(d, dict) or d.get("Pass") != "inline":
            continue
        kind = d.get("_kind")
        if kind not in ("Missed", "Passed"):
            continue
        args = d.get("Args") or []
        callee = caller = None
        text_parts = []
        for a in args:
            if not isinstance(a, dict):
                continue
            if "Callee" in a:
                callee = str(a["Callee"])
                text_parts.append(callee)
            elif "Caller" in a:
                caller = str(a["Caller"])
                text_parts.append(caller)
            else:
                for k, v in a.items():
                    if k != "DebugLoc":
                        text_parts.append(str(v))
        if callee is None:
            continue
        msg = "".join(text_parts)
        reason = ""
        if " because " in msg:
            reason = msg.split(" because ", 1)[1]
        elif ": " in msg:
            reason = msg.split(": ", 1)[1]
        loc = d.get("DebugLoc") or {}
        where = f"{loc.get('File', '')}:{loc.get('Line', '')}:{loc.get('Column', '')}" if loc else ""
        out.append(Remark(callee, caller or d.get("Function"), PASSED if kind == "Passed" else MISSED,
                          reason.strip(), where, "clang", str(d.get("Name", ""))))
    return out


def parse_clang_stderr(text: str) -> list[Remark]:
    out = []
    for line in text.splitlines():
        m = _CLANG_RPASS.match(line.strip())
        if not m:
            continue
        rest = m.group("rest").strip()
        if rest.startswith("because "):
            rest = rest[len("because "):]
        elif rest.startswith(":"):
            rest = rest[1:].strip()
        out.append(Remark(m.group("callee"), m.group("caller"),
                          MISSED if m.group("what") == "not inlined" else PASSED, rest, m.group("loc"), "clang"))
    return out


def parse_text(text: str) -> list[Remark]:
    """Any of the text formats, told apart by their content."""
    head = text.lstrip()[:200]
    if head.startswith("--- !"):
        return parse_clang_yaml(text)
    if head.startswith("["):
        try:
            return parse_gcc_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise InputError(f"corrupt gcc optimization record ({e})") from None
    if " remark: " in text:
        return parse_clang_stderr(text)
    return parse_gcc_text(text)


def read_remarks(path: str | Path) -> list[Remark]:
    """Remarks from one report file (gzip is detected from its magic bytes)."""
    path = Path(path)
    raw = read_input(path)                   # a regular file only: never a FIFO or device
    if raw[:2] == b"\x1f\x8b":
        raw = gunzip(raw, str(path))         # bounded: a gzip bomb is an InputError
    try:
        return parse_text(raw.decode("utf-8", "replace"))
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def reasons_for(remarks: list[Remark], callee: str) -> list[str]:
    """Distinct 'not inlined' reasons for a callee; the final (IPA) inliner's first, early ones last."""
    seen: dict[str, int] = {}
    for r in remarks:
        if r.callee == callee and r.decision == MISSED and r.reason:
            rank = 1 if r.stage == "early" else 0
            seen[r.reason] = min(seen.get(r.reason, rank), rank)
    return [k for k, _ in sorted(seen.items(), key=lambda kv: kv[1])]

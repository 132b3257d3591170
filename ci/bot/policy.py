"""The bot's configuration (a TOML file): what to test, what is worth a mail, where mail goes.

Every key has a default, so an empty file (or none) is a working dry configuration;
unknown sections or keys and wrong types are one-line errors (a typo must not silently
turn a check off). The SMTP password is never stored in the Policy's repr and may come
from the environment (``password_env``) instead of the file.

    [bot]     address, name, dashboard_url, tree, base, toolchains, targets, config,
              config_fragment, keep_vmlinux, measure, incomplete_timeout, poll_interval, daily_cap, dry_run,
              checks_dir, max_table_rows, max_cc
    [watch]   lists, senders, opt_out
    [report]  always_inline_copy, hot_not_inlined, boundary_crossing, build_error,
              build_error_one_compiler, pushed_out_of_line, newly_out_of_line,
              likely_path_call, likely_path_lines, likely_path_cycles,
              cost_mcpu, cost_lines, cost_cycles_percent,
              fastpath_instructions, fastpath_lines, runtime_instructions, runtime_percent, runtime_lines,
              growth_bytes, growth_percent, inline_growth_bytes, inline_growth_percent, not_applied, incomplete, min_compilers,
              shrinks_note
    [smtp]    host, port, starttls, ssl, username, password, password_env, ca_file, timeout
    [outbox]  path
    [lists."ADDRESS"]  justification_trailer
"""
from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from analyzer.errors import InputError
from toolchains.errors import BuildError
from toolchains.kbuild import PRESETS, Config, preset
from toolchains.registry import DEFAULT_TOOLCHAINS
from toolchains.targets import DEFAULT_TARGETS, is_linked

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(value: Any, where: str) -> timedelta:
    """``90``, ``"30s"``, ``"10m"``, ``"6h"``, ``"2d"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return timedelta(seconds=value)
    m = _DURATION.match(str(value)) if isinstance(value, str) else None
    if not m:
        raise InputError(f"{where}: expected a duration like 30s, 10m, 6h or 2d, got {value!r}")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


@dataclass(frozen=True)
class Watch:
    lists: tuple[str, ...] = ()          # empty: every list
    senders: tuple[str, ...] = ()        # fnmatch patterns on the sender's address; empty: everyone
    opt_out: tuple[str, ...] = ()        # tested, never mailed

    def watches_list(self, addresses: list[str], list_ids: list[str]) -> bool:
        if not self.lists:
            return True
        addrs = {a.rsplit("<", 1)[-1].rstrip(">").strip().lower() for a in addresses}
        ids = " ".join(list_ids).lower()
        for lst in self.lists:
            lst = lst.lower()
            if lst in addrs or lst.replace("@", ".") in ids or (lst in ids and "@" not in lst):
                return True
        return False

    def watches_sender(self, addr: str) -> bool:
        return not self.senders or any(fnmatch.fnmatch(addr.lower(), p.lower()) for p in self.senders)

    def opted_out(self, addr: str) -> bool:
        return any(fnmatch.fnmatch(addr.lower(), p.lower()) for p in self.opt_out)


@dataclass(frozen=True)
class ListRules:
    """Per-list habits (``[lists."linux-mm@kvack.org"]``)."""
    # a trailer in the commit message (e.g. Size-Justification:) that silences growth findings
    # (growth, boundary_crossing) for that patch, as Chromium's Binary-Size: footer does; '' = none
    justification_trailer: str = ""


@dataclass(frozen=True)
class ReportRules:
    always_inline_copy: bool = True      # a new out-of-line copy of an __always_inline function
    hot_not_inlined: bool = True         # a hot-path inline function newly left out of line
    boundary_crossing: bool = True       # a hot function grew across an alignment unit / cache line
    link_cache_lines: bool = True        # a hot function spans more cache lines at its vmlinux address
    link_phase: bool = False             # ... its entry sits at another 64-byte phase (any move does that)
    build_error: bool = True             # the patch breaks the build under every compiler
    build_error_one_compiler: bool = True  # ... under some compilers but not others
    pushed_out_of_line: bool = False     # an unchanged function pushed out of line by others' inlining
    newly_out_of_line: bool = False      # any function newly out of line
    likely_path_call: bool = True        # a new call on a hot function's likely path
    likely_path_lines: bool = True       # ... its likely path touches more 64-byte lines
    likely_path_cycles: bool = False     # ... its llvm-mca estimate grew (an estimate: off by default)
    cost_mcpu: str = "skylake-avx512"    # the llvm-mca CPU model the bot's builds are estimated for
    cost_lines: int = 1                  # likely_path_lines: this many more 64-byte lines (0: never)
    cost_cycles_percent: float = 10.0    # likely_path_cycles: estimated cycles grew by this much (0: never)

    @property
    def cost_thresholds(self):
        """The pipeline's thresholds (analyzer.likely_path_cost.CostThresholds) for these rules."""
        from analyzer.likely_path_cost import CostThresholds
        return CostThresholds(lines=self.cost_lines, cycles_percent=self.cost_cycles_percent)
    # a measured vmlinux's fast path ([bot] measure) against its parent's, per alloc/free pair at any order
    fastpath_instructions: bool = True   # executed instructions grew past runtime_instructions AND runtime_percent
    fastpath_lines: bool = True          # 64-byte lines touched grew by at least runtime_lines
    runtime_instructions: float = 2.0    # instructions per pair (0: the percentage alone judges)
    runtime_percent: float = 1.0         # percent of the parent's instructions per pair (0: the count alone judges)
    runtime_lines: int = 1               # lines per pair (0: never a finding)

    @property
    def runtime_thresholds(self):
        """The report's thresholds (analyzer.runtime_findings.RuntimeThresholds) for these rules."""
        from analyzer.runtime_findings import RuntimeThresholds
        return RuntimeThresholds(self.runtime_instructions, self.runtime_percent, self.runtime_lines)
    growth_bytes: int = 0                # the target grew by more than this (0: off)
    growth_percent: float = 0.0          # ... or by more than this percentage (0: off)
    # an inline function's bytes in the whole target (every inlined copy in the object, or kernel-wide
    # in a vmlinux: ci.pipeline.inline_costs) grew by more than this (0: off)
    inline_growth_bytes: int = 0
    inline_growth_percent: float = 0.0   # ... or by more than this percentage of its bytes before (0: off;
                                         # a function inlined nowhere before is judged by bytes alone)
    not_applied: bool = True             # say (once) that a series does not apply
    incomplete: bool = True              # say (once) that a series stayed incomplete
    min_compilers: int = 1               # a finding is mailed when at least this many compilers agree on it
    shrinks_note: bool = False           # a mail also says under which compilers the patch shrinks the target


@dataclass(frozen=True)
class SmtpSettings:
    host: str = "localhost"
    port: int = 25
    starttls: bool = True
    ssl: bool = False                    # implicit TLS (port 465) instead of STARTTLS
    username: str = ""
    password: str = field(default="", repr=False)
    password_env: str = "SIZEWATCH_SMTP_PASSWORD"
    ca_file: str = ""                    # trust this CA (a private relay); default: the system's
    timeout: float = 30.0

    def secret(self) -> str:
        """The password: the config's, else the environment's (never printed or logged)."""
        return self.password or os.environ.get(self.password_env, "")

    @property
    def label(self) -> str:
        return f"smtp {self.host}:{self.port}"


@dataclass(frozen=True)
class Policy:
    address: str = "sizewatch-bot@localhost"
    name: str = "sizewatch bot"
    dashboard_url: str = "http://127.0.0.1:5000"
    tree: str = "6.1"
    base: str = "HEAD"                   # when a series' base-commit: is absent or not in the tree
    toolchains: tuple[str, ...] = DEFAULT_TOOLCHAINS
    targets: tuple[str, ...] = DEFAULT_TARGETS
    config: str = "defconfig"            # a config of toolchains/configs (defconfig, allocator, tinyconfig)
    arch: str = "x86_64"                 # the kernel's architecture (arm64: the config's twin in configs/arm64/)
    config_fragment: tuple[str, ...] = ()   # extra lines on top of it
    keep_vmlinux: int = 3                # vmlinux files kept in the cache per toolchain and config
    measure: bool = False                # boot each vmlinux built under QEMU TCG and count the fast path's instructions
    incomplete_timeout: timedelta = timedelta(hours=6)
    poll_interval: timedelta = timedelta(seconds=60)
    daily_cap: int = 50                  # mails per UTC day; 0: no cap
    dry_run: bool = False
    checks_dir: str = ""                 # patchwork-style check JSON per patch ('' = none)
    max_table_rows: int = 40
    max_cc: int = 20                     # reply-all Cc beyond the watched lists (a maintainer set is ~10-20)
    watch: Watch = Watch()
    report: ReportRules = ReportRules()
    smtp: SmtpSettings | None = None
    outbox: str = ""
    source: str = ""                     # the file it was read from
    lists: tuple[tuple[str, ListRules], ...] = ()   # per-list rules, by list address

    def list_rules(self, addresses: list[str], list_ids: list[str]) -> ListRules:
        """The rules of the first configured list a message went to (defaults when none)."""
        for name, rules in self.lists:
            if Watch((name,)).watches_list(addresses, list_ids):
                return rules
        return ListRules()

    @property
    def kbuild_config(self) -> Config:
        """The named config with the extra lines (those it already has are not repeated)."""
        base = preset(self.config, arch=self.arch)
        return preset(self.config, tuple(ln for ln in self.config_fragment if ln not in base.fragment), self.arch)


def _check(value: Any, want: type | tuple, where: str) -> Any:
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if want is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError(f"{where}: expected a list of strings")
        return tuple(value)
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        name = want.__name__ if isinstance(want, type) else "value"
        raise InputError(f"{where}: expected {'a' if name[0] not in 'aeiou' else 'an'} {name}, got {value!r}")
    return value


def _section(cls: type, data: dict, where: str, skip: tuple[str, ...] = ()) -> dict:
    types = {f.name: f.type for f in fields(cls) if f.name not in skip}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in types:
            raise InputError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(types))})")
        t = types[key]
        spot = f"{where}.{key}"
        if key in ("incomplete_timeout", "poll_interval"):
            out[key] = duration(value, spot)
        elif "tuple" in str(t):
            out[key] = _check(value, tuple, spot)
        elif "bool" in str(t):
            out[key] = _check(value, bool, spot)
        elif "float" in str(t):
            out[key] = _check(value, float, spot)
        elif "int" in str(t):
            out[key] = _check(value, int, spot)
            if out[key] < 0:
                raise InputError(f"{spot}: must not be negative")
        else:
            out[key] = _check(value, str, spot)
    return out


def parse_policy(text: str, source: str = "<config>") -> Policy:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{source}: not valid TOML: {e}") from None
    known = {"bot", "watch", "report", "smtp", "outbox", "lists"}
    for sec, val in doc.items():
        if sec not in known:
            raise InputError(f"{source}: unknown section [{sec}] (known: {', '.join(sorted(known))})")
        if not isinstance(val, dict):
            raise InputError(f"{source}: {sec} must be a [section]")
    bot = _section(Policy, doc.get("bot", {}), f"{source}: [bot]",
                   skip=("watch", "report", "smtp", "outbox", "source", "lists"))
    lists = []
    for name, val in doc.get("lists", {}).items():
        if not isinstance(val, dict):
            raise InputError(f"{source}: [lists.{name!r}] must be a table of settings")
        rules = ListRules(**_section(ListRules, val, f'{source}: [lists."{name}"]'))
        if rules.justification_trailer and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", rules.justification_trailer):
            raise InputError(f'{source}: [lists."{name}"].justification_trailer: not a trailer name '
                             f"(like Size-Justification): {rules.justification_trailer!r}")
        lists.append((name, rules))
    watch = Watch(**_section(Watch, doc.get("watch", {}), f"{source}: [watch]"))
    report = ReportRules(**_section(ReportRules, doc.get("report", {}), f"{source}: [report]"))
    smtp = SmtpSettings(**_section(SmtpSettings, doc["smtp"], f"{source}: [smtp]")) if "smtp" in doc else None
    outbox = doc.get("outbox", {})
    for key in outbox:
        if key != "path":
            raise InputError(f"{source}: [outbox]: unknown key {key!r} (known: path)")
    path = _check(outbox.get("path", ""), str, f"{source}: [outbox].path")
    if "dashboard_url" in bot:
        bot["dashboard_url"] = bot["dashboard_url"].rstrip("/")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", report.cost_mcpu):
        raise InputError(f"{source}: [report].cost_mcpu: not a CPU name (like skylake-avx512 or znver3): "
                         f"{report.cost_mcpu!r}")
    if not 0 <= report.cost_cycles_percent < float("inf"):
        raise InputError(f"{source}: [report].cost_cycles_percent: must be a percentage >= 0, "
                         f"got {report.cost_cycles_percent!r}")
    if not 0 <= report.inline_growth_percent < float("inf"):
        raise InputError(f"{source}: [report].inline_growth_percent: must be a percentage >= 0, "
                         f"got {report.inline_growth_percent!r}")
    for key in ("runtime_instructions", "runtime_percent"):
        if not 0 <= getattr(report, key) < float("inf"):
            raise InputError(f"{source}: [report].{key}: must be a number >= 0, got {getattr(report, key)!r}")
    if report.min_compilers < 1:
        raise InputError(f"{source}: [report].min_compilers: must be at least 1")
    n_tc = len(bot.get("toolchains", DEFAULT_TOOLCHAINS))
    if report.min_compilers > n_tc:
        raise InputError(f"{source}: [report].min_compilers: {report.min_compilers} is more than the "
                         f"{n_tc} toolchains tested (no finding could ever be mailed)")
    if bot.get("config", "defconfig") not in PRESETS:
        raise InputError(f"{source}: [bot].config: unknown config {bot['config']!r} "
                         f"(known: {', '.join(PRESETS)})")
    try:
        from toolchains.presets import fragment_lines
        fragment_lines("\n".join(bot.get("config_fragment", ())), f"{source}: [bot].config_fragment")
    except BuildError as e:
        raise InputError(str(e)) from None
    arch = bot.get("arch", "x86_64")
    if arch not in ("x86_64", "arm64"):
        raise InputError(f"{source}: [bot].arch: unknown arch {arch!r} (known: x86_64, arm64)")
    if arch != "x86_64":
        try:
            preset(bot.get("config", "defconfig"), arch=arch)
        except BuildError as e:
            raise InputError(f"{source}: [bot].config: {e}") from None
        if bot.get("measure"):
            raise InputError(f"{source}: [bot].measure boots x86_64 kernels (qemu-system-x86_64): not {arch}")
    if bot.get("measure") and not any(is_linked(t) for t in bot.get("targets", DEFAULT_TARGETS)):
        raise InputError(f"{source}: [bot].measure: measures a built vmlinux: add \"vmlinux\" to [bot].targets")
    if "@" not in bot.get("address", "x@y"):
        raise InputError(f"{source}: [bot].address: not a mail address: {bot['address']!r}")
    return Policy(**bot, watch=watch, report=report, smtp=smtp, outbox=path, source=source, lists=tuple(lists))


def load_policy(path: Path | None) -> Policy:
    """The policy in ``path`` (defaults for everything when None)."""
    if path is None:
        return Policy()
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"{path}: cannot read the bot config ({e.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: the bot config is not UTF-8 text") from None
    return parse_policy(text, str(path))

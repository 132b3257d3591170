"""The house's rules, kept in the repository (docs/architecture.md, "The layers"): no import
circles between files, every import pointing down the layers (analyzer → toolchains → db → ci →
web, with cli/ on top of them all), and the commands that must stay light staying light."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["analyzer", "toolchains", "db", "ci", "web", "cli"]


def modules() -> dict[str, Path]:
    out = {}
    for pkg in LAYERS:
        for path in (ROOT / pkg).rglob("*.py"):
            if "node_modules" in path.parts or "__pycache__" in path.parts:
                continue
            rel = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[rel.removesuffix(".__init__")] = path
    return out


def imports(path: Path, name: str, mods: dict[str, Path]) -> list[tuple[str, int]]:
    """(module of ours, line) for every import in the file, lazy ones (inside functions) included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                parts = parts[: len(parts) - node.level + (1 if path.name == "__init__.py" else 0)]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                found.append((full if full in mods else base, node.lineno))
    out = []
    for target, line in found:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.append((target, line))
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_circles_and_every_import_points_down():
    mods = modules()
    assert len(mods) > 100 and "cli.main" in mods and "analyzer.runtime" in mods
    graph: dict[str, set[str]] = {}
    upward = []
    for name, path in mods.items():
        deps = imports(path, name, mods)
        graph[name] = {t for t, _ in deps if not t.startswith(name + ".")}
        for t, line in deps:
            if LAYERS.index(t.split(".")[0]) > LAYERS.index(name.split(".")[0]):
                upward.append(f"{path.relative_to(ROOT)}:{line} -> {t}")
    assert upward == []
    assert circles(graph) == []


def test_the_checker_sees_a_circle_and_an_upward_import():
    """The rule's own oracle: made-up graphs with a circle, and none."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def _modules_after(code: str) -> set[str]:
    p = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('@@', ' '.join(sorted(sys.modules)))"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    return set(p.stdout.rpartition("@@")[2].split())


def test_light_commands_stay_light(tmp_path):
    """``sizewatch inspect`` never loads Flask, the store or the build stack; sizediff's
    bloat-o-meter command lines run without click."""
    loaded = _modules_after("from cli.main import group; group.get_command(None, 'inspect')")
    assert not {m for m in loaded if m.split(".")[0] in ("flask", "werkzeug", "jinja2", "rq", "psycopg")}
    assert not {m for m in loaded if m.split(".")[0] in ("db", "ci", "web")}
    obj = tmp_path / "empty.o"
    subprocess.run(["gcc", "-c", "-x", "c", "-o", str(obj), "-"], input="int f(void){return 1;}\n", text=True,
                   check=True)
    # sizediff leaves through os._exit after writing: read what it imported from -X importtime
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "cli.sizediff", str(obj), str(obj)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("add/remove: 0/0"), (p.stdout, p.stderr[-500:])
    loaded = {ln.rsplit("|", 1)[1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
    assert "click" not in loaded and "flask" not in loaded
    assert "analyzer.bloat" in loaded

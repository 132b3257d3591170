"""The wheel a user installs with ``pip install``: built from a clean clone of this checkout's HEAD
(as ``pip install git+URL`` builds it: no web/node_modules, the build runs ``npm ci``), installed
into a fresh virtualenv outside it, and run from a directory that knows nothing of the checkout. It
must carry everything the commands read at run time (migrations, templates, static files, Chart.js
and ECharts, the toolchain registry, the example series, the runtime's C sources) and work on a
store it creates; the sdist of a clean clone must carry the same files.

Nothing comes from a package index at test time: the build uses this environment's setuptools and
wheel (``--no-build-isolation``), and the new virtualenv installs the dependencies from a wheelhouse
repacked from the distributions installed here (``--no-index --find-links``). Only npm's registry
(or npm's cache) is asked, by the build's ``npm ci``. Commit first: uncommitted changes are not in
the clone.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

# what the commands read at run time, besides the code: (package dir, glob) in the source tree
RUNTIME_DATA = (("db/migrations", "*.sql"), ("toolchains/registry", "*.toml"), ("toolchains/configs", "*.config"),
                ("toolchains/examples", "*.mbox"), ("toolchains/runtime", "*.c"), ("toolchains/runtime/guest", "*.c"),
                ("toolchains/runtime/guest", "Kbuild"), ("web/templates", "*.html"), ("web/static", "*.css"),
                ("web/static", "*.js"))
CHARTS = ("web/node_modules/chart.js/dist/chart.umd.min.js", "web/node_modules/echarts/dist/echarts.min.js")


def _run(*args, cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def _clean_clone(dest: Path) -> Path:
    """A clone of this checkout's HEAD: what pip builds from a git URL (no node_modules, no build/)."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(dest)], check=True, timeout=300)
    assert not (dest / "web" / "node_modules").exists()
    return dest


def _wanted_files(src: Path) -> list[str]:
    """The run-time package data the clean tree has, as paths relative to the package root."""
    found = [str(p.relative_to(src)) for d, pat in RUNTIME_DATA for p in sorted((src / d).glob(pat))]
    assert all(any(f.startswith(d + "/") for f in found) for d, _pat in RUNTIME_DATA)
    return found


def _requirements(dist_name: str | None, reqs: list[str], extras: frozenset = frozenset()) -> set[str]:
    """The names of the distributions installed here that ``reqs`` need, transitively."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    out: set[str] = set()
    todo = [(r, extras) for r in reqs]
    while todo:
        raw, ex = todo.pop()
        req = Requirement(raw)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (ex or {""})):
            continue
        name = canonicalize_name(req.name)
        if name in out:
            continue
        out.add(name)
        todo.extend((r, frozenset(req.extras)) for r in (md.distribution(name).requires or []))
    return out


def _repack(dist: md.Distribution, dest: Path) -> Path:
    """An installed distribution as a wheel again: its files under site-packages, its dist-info
    (without pip's INSTALLER/REQUESTED/direct_url.json) and a fresh RECORD; console scripts come
    back from entry_points.txt when pip installs it."""
    wheel_meta = dist.read_text("WHEEL") or ""
    tags = [t.split("-") for t in re.findall(r"^Tag: (\S+)$", wheel_meta, re.M)]
    assert tags, f"{dist.metadata['Name']}: installed without a WHEEL file: cannot be repacked"
    tag = "-".join(".".join(sorted({t[i] for t in tags})) for i in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    info = next(str(f).split("/")[0] for f in dist.files if str(f).endswith(".dist-info/METADATA"))
    whl = dest / f"{name}-{dist.version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for f in dist.files:
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc") or \
                    rel in (f"{info}/RECORD", f"{info}/INSTALLER", f"{info}/REQUESTED", f"{info}/direct_url.json"):
                continue
            data = Path(f.locate()).read_bytes()
            z.writestr(rel, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{rel},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return whl


def _wheelhouse(src: Path, dest: Path) -> Path:
    """Wheels of every distribution the wheel's install_requires need, from this environment."""
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(src / "setup.cfg")
    reqs = [r.strip() for r in cfg["options"]["install_requires"].splitlines() if r.strip()]
    dest.mkdir()
    for name in sorted(_requirements(None, reqs)):
        _repack(md.distribution(name), dest)
    return dest


def _build_env() -> dict:
    """pip with no index at all, building with this environment's setuptools and wheel."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _build_wheel(src: Path, dist: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(dist), str(src)], capture_output=True, text=True, timeout=900,
                          env=env or _build_env())


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    try:
        import wheel  # noqa: F401  (setuptools < 70.1 builds wheels with it)
    except ImportError:
        pytest.fail("the wheel package is not installed here: pip install -e '.[test]' installs it "
                    "(the build runs without build isolation, with this environment's setuptools)")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _clean_clone(tmp / "clone")
    dist = tmp / "dist"
    built = _build_wheel(src, dist)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("sizewatch-*.whl")
    house = _wheelhouse(src, tmp / "wheelhouse")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    inst = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(house),
                           str(wheel)], capture_output=True, text=True, timeout=900, env=_build_env())
    assert inst.returncode == 0, inst.stderr
    away = tmp / "elsewhere"                      # no checkout here: only the installed package can answer
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SIZEWATCH_CACHE=str(tmp / "cache"), SIZEWATCH_DB=str(away / "new.db"),
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    return {"wheel": wheel, "venv": venv, "cwd": away, "env": env, "src": src}


def test_the_wheel_carries_what_the_commands_read(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    wanted = _wanted_files(installed["src"])
    assert [f for f in wanted if f not in names] == []
    for want in (*CHARTS, "web/node_modules/chart.js/LICENSE.md", "web/node_modules/echarts/LICENSE",
                 "toolchains/examples/rmqueue-always-inline.mbox", "cli/main.py", "ci/bot/service.py"):
        assert want in names, want


def test_the_sdist_of_a_clean_clone_is_complete(tmp_path):
    """``setuptools.build_meta.build_sdist`` (what ``python -m build --sdist`` runs) in a clean
    clone: npm ci runs, and the sdist holds the chart files and every run-time data file."""
    src = _clean_clone(tmp_path / "clone")
    made = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                           "print(b.build_sdist(sys.argv[1]))", str(tmp_path / "dist")],
                          cwd=src, capture_output=True, text=True, timeout=900, env=_build_env())
    assert made.returncode == 0, made.stderr
    sdist = tmp_path / "dist" / made.stdout.split()[-1]
    with tarfile.open(sdist) as t:
        top = t.getnames()[0].split("/")[0]
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert top.startswith("sizewatch-")
    for want in (*CHARTS, *_wanted_files(src), "web/package-lock.json", "setup.py", "setup.cfg",
                 "analyzer/dwarf/_libdw.c"):
        assert want in names, want


def test_a_build_without_npm_says_so_in_one_line(tmp_path):
    """A clean tree on a machine without npm: the build stops with the one line that says why."""
    src = _clean_clone(tmp_path / "clone")
    bare = tmp_path / "bin"                       # a PATH without npm (python is run by its full path)
    bare.mkdir()
    env = {**_build_env(), "PATH": str(bare)}
    got = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                          "b.build_sdist(sys.argv[1])", str(tmp_path / "dist")], cwd=src, capture_output=True,
                         text=True, timeout=300, env=env)
    assert got.returncode == 1 and got.stderr.strip().splitlines()[-1] == \
        "npm not found: the dashboard's chart libraries come from npm (install nodejs/npm)", got.stderr


def _new_store(venv: Path, cwd: Path, env: dict) -> None:
    """A new store made by the installed package (what a first run does): its migrations come from the wheel."""
    made = _run(venv / "bin" / "python", "-c", "from db.store import open_store; open_store(None).close()",
                cwd=cwd, env=env)
    assert made.returncode == 0 and (cwd / "new.db").is_file(), made


def test_installed_commands_run_outside_the_checkout(installed):
    venv, cwd, env = installed["venv"], installed["cwd"], installed["env"]
    where = _run(venv / "bin" / "python", "-c", "import cli, db; print(cli.__file__, db.__file__)", cwd=cwd, env=env)
    assert where.returncode == 0 and str(ROOT) not in where.stdout and str(venv) in where.stdout, where

    hist = _run(venv / "bin" / "sizewatch", "history", "get_page_from_freelist", cwd=cwd, env=env)
    assert hist.returncode == 1 and hist.stderr.endswith("new.db: no store there yet (sizewatch run or sizewatch "
                                                         "bot writes one)\n"), hist   # a reader creates nothing
    assert not (cwd / "new.db").exists()
    _new_store(venv, cwd, env)
    hist = _run(venv / "bin" / "sizewatch", "history", "get_page_from_freelist", cwd=cwd, env=env)
    assert hist.returncode == 1, hist
    assert hist.stderr == "sizewatch: get_page_from_freelist: not found in any stored build\n"   # a store, migrated

    rep = _run(venv / "bin" / "sizewatch", "report", "deadbeef", cwd=cwd, env=env)
    assert rep.returncode == 1 and rep.stderr == "sizewatch: 'deadbeef': no such commit or series in the store\n", rep

    toolchains = _run(venv / "bin" / "sizewatch", "toolchains", "--json", cwd=cwd, env=env)
    assert toolchains.returncode == 0, toolchains.stderr
    assert {"gcc-12", "clang-19"} <= {t["name"] for t in json.loads(toolchains.stdout)}


def test_installed_dashboard_serves_pages_and_chart_js(installed):
    venv, cwd, env = installed["venv"], installed["cwd"], installed["env"]
    if not (cwd / "new.db").exists():
        _new_store(venv, cwd, env)
    proc = subprocess.Popen([str(venv / "bin" / "sizewatch"), "serve", "--port", "0"], cwd=cwd, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert "serving" in line, line
        base = line.split(" on ", 1)[1].split()[0].rstrip("/")
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(base + "/", timeout=5) as r:
                    assert r.status == 200 and b"sizewatch" in r.read()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        with urllib.request.urlopen(base + "/static/vendor/chart.umd.min.js", timeout=5) as r:
            assert r.status == 200 and b"Chart" in r.read()
        with urllib.request.urlopen(base + "/api/", timeout=5) as r:
            assert json.loads(r.read())["commits"] == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _fixture_object(tmp: Path) -> Path:
    obj = tmp / "callers.o"
    subprocess.run(["gcc-12", "-c", "-O2", "-g", "-o", str(obj), str(ROOT / "tests" / "fixtures" / "inline_cost" /
                                                                     "callers.c")], check=True)
    return obj


READ = ("import sys; from analyzer.dwarf import native; from analyzer.inline_cost import inline_cost; "
        "r = inline_cost(sys.argv[1]); print(native.available(), r.callees['mix'].instances, r.inlined_bytes)")


def test_the_wheel_carries_the_libdw_reader(installed, tmp_path):
    """Built where libdw-dev is installed (scripts/install.sh), the wheel holds the native DWARF
    reader and the installed package uses it."""
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    has_headers = Path("/usr/include/elfutils/libdw.h").is_file()
    assert any(n.startswith("analyzer/dwarf/_libdw.") and n.endswith(".so") for n in names) == has_headers
    got = _run(installed["venv"] / "bin" / "python", "-c", READ, _fixture_object(tmp_path), cwd=installed["cwd"],
               env=installed["env"])
    assert got.returncode == 0, got.stderr
    available, mix, total = got.stdout.split()
    assert available == str(has_headers) and int(mix) == 6 and int(total) > 0
    installed["native_result"] = (mix, total)


def test_without_libdw_the_wheel_reads_dwarf_in_python(installed, tmp_path):
    """A machine that cannot build the extension (here: no C compiler) still builds and installs
    the wheel, and reads DWARF with the pure-Python walker, with the same result. Runs last: it
    replaces the installed package."""
    dist = tmp_path / "dist"
    src = _clean_clone(tmp_path / "clone")       # the first build's build/ holds the compiled extension
    built = _build_wheel(src, dist, env={**_build_env(), "CC": "false"})
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("sizewatch-*.whl")
    assert not any(n.endswith(".so") for n in zipfile.ZipFile(wheel).namelist())
    inst = _run(installed["venv"] / "bin" / "pip", "install", "-q", "--no-index", "--no-deps", "--force-reinstall", wheel,
                cwd=installed["cwd"], env=installed["env"])
    assert inst.returncode == 0, inst.stderr
    got = _run(installed["venv"] / "bin" / "python", "-c", READ, _fixture_object(tmp_path), cwd=installed["cwd"],
               env=installed["env"])
    assert got.returncode == 0, got.stderr
    available, mix, total = got.stdout.split()
    assert available == "False" and int(mix) == 6
    if "native_result" in installed:
        assert (mix, total) == installed["native_result"]

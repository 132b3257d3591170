"""The wheel a user installs with ``pip install``: built from this checkout, installed into a fresh
virtualenv outside it, and run from a directory that knows nothing of the checkout. It must carry
everything the commands read at run time (migrations, templates, static files, Chart.js, the toolchain
registry, the example series) and work on a store it creates."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _run(*args, cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    leftovers = [p for p in (ROOT / "build", ROOT / "sizewatch.egg-info") if not p.exists()]
    try:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
                               capture_output=True, text=True, timeout=600)
    finally:                                      # setuptools builds in the tree: leave it as it was
        for p in leftovers:
            shutil.rmtree(p, ignore_errors=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("sizewatch-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    inst = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True, text=True,
                          timeout=900)
    assert inst.returncode == 0, inst.stderr
    away = tmp / "elsewhere"                      # no checkout here: only the installed package can answer
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SIZEWATCH_CACHE=str(tmp / "cache"), SIZEWATCH_DB=str(away / "new.db"),
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    return {"wheel": wheel, "venv": venv, "cwd": away, "env": env}


def test_the_wheel_carries_what_the_commands_read(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    migrations = sorted(p.name for p in (ROOT / "db" / "migrations").glob("*.sql"))
    assert migrations and all(f"db/migrations/{m}" in names for m in migrations)
    for want in ("web/templates/commit.html", "web/static/sizewatch.css",
                 "web/node_modules/chart.js/dist/chart.umd.min.js", "web/node_modules/echarts/dist/echarts.min.js",
                 "web/static/sizemap.js", "toolchains/registry/gcc-12.toml",
                 "toolchains/examples/rmqueue-always-inline.mbox", "cli/main.py", "ci/bot/service.py"):
        assert want in names, want


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
    env = {**os.environ, "CC": "false"}
    leftovers = [p for p in (ROOT / "build", ROOT / "sizewatch.egg-info") if not p.exists()]
    try:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
                               capture_output=True, text=True, timeout=600, env=env)
    finally:
        for p in leftovers:
            shutil.rmtree(p, ignore_errors=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("sizewatch-*.whl")
    assert not any(n.endswith(".so") for n in zipfile.ZipFile(wheel).namelist())
    inst = _run(installed["venv"] / "bin" / "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel,
                cwd=installed["cwd"], env=installed["env"])
    assert inst.returncode == 0, inst.stderr
    got = _run(installed["venv"] / "bin" / "python", "-c", READ, _fixture_object(tmp_path), cwd=installed["cwd"],
               env=installed["env"])
    assert got.returncode == 0, got.stderr
    available, mix, total = got.stdout.split()
    assert available == "False" and int(mix) == 6
    if "native_result" in installed:
        assert (mix, total) == installed["native_result"]

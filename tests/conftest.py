"""Shared fixtures: the real oracles (bloat-o-meter from the Debian tarballs), real compilers,
and mm/page_alloc.o built from linux-source-6.1 at each patch of the example series.

Everything expensive is cached under the sizewatch cache (~/.cache/sizewatch), so a second
run on the same machine, and every later test of one run, reuses it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
OUTPUT = ROOT / "test-output"


def _cache() -> Path:
    from toolchains.source import cache_dir
    return cache_dir()


def extract_from_tarball(version: str, member_suffix: str) -> Path:
    """One file of /usr/src/linux-source-VERSION.tar.xz, extracted once into the cache."""
    dest = _cache() / "oracles" / version / Path(member_suffix).name
    if dest.exists():
        return dest
    tarball = Path(f"/usr/src/linux-source-{version}.tar.xz")
    if not tarball.exists():
        pytest.fail(f"{tarball} missing: scripts/install.sh installs linux-source-{version}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    member = f"linux-source-{version}/{member_suffix}"
    tmp = dest.with_suffix(".tmp")
    subprocess.run(f"tar -xJOf {tarball} {member} > {tmp}", shell=True, check=True)
    tmp.rename(dest)
    return dest


@pytest.fixture(scope="session")
def bloat_o_meter():
    """Run the kernel's own scripts/bloat-o-meter (6.12 by default, or 6.1)."""
    def run(*args: str, version: str = "6.12") -> subprocess.CompletedProcess:
        script = extract_from_tarball(version, "scripts/bloat-o-meter")
        return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True)
    return run


def sizediff_cmd() -> list[str]:
    exe = shutil.which("sizediff", path=str(Path(sys.executable).parent)) or shutil.which("sizediff")
    return [exe] if exe else [sys.executable, "-m", "cli.sizediff"]


@pytest.fixture(scope="session")
def sizediff():
    """Run our sizediff as a user would (the console script)."""
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*sizediff_cmd(), *map(str, args)], capture_output=True)
    return run


@pytest.fixture(scope="session")
def compile_c(tmp_path_factory):
    """Compile a C file with a real compiler into a session temp dir; returns the object path.
    ``cwd`` (the DWARF's comp_dir) is pytest's own unless given."""
    out = tmp_path_factory.mktemp("cc")

    def cc(compiler: str, source: Path, *flags: str, name: str | None = None, cwd: Path | None = None) -> Path:
        if shutil.which(compiler) is None:
            pytest.fail(f"{compiler} missing: scripts/install.sh installs it")
        obj = out / (name or f"{source.stem}-{compiler}-{abs(hash(flags)) % 10**8}.o")
        subprocess.run([compiler, "-c", "-O2", "-g", *flags, "-o", str(obj), str(source)], check=True, cwd=cwd)
        return obj
    return cc


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/*.golden from this run's output instead of comparing")


GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture(scope="session")
def golden(request):
    """Compare a command's output with ``tests/golden/NAME.golden`` (SuperSize's way: run with
    ``--update-golden`` to rewrite the files, then read the diff in review)."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / f"{name}.golden"
        if update:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"{path} missing: run pytest --update-golden once and review it")
        want = path.read_text()
        if text != want:
            import difflib
            diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), str(path), "now", n=2))
            pytest.fail(f"output differs from {path.name} (pytest --update-golden rewrites it):\n{diff[:6000]}")
    return check


_series_cache: dict[str, list] = {}


@pytest.fixture(scope="session")
def example_series():
    """mm/page_alloc.o at the base and after each example patch, for a toolchain:
    a list of toolchains.example.BuiltCommit (stock, patch 1, patch 2)."""
    def get(toolchain: str):
        if toolchain not in _series_cache:
            from toolchains.example import build_series
            _series_cache[toolchain] = build_series(toolchain)
        return _series_cache[toolchain]
    return get


EXAMPLE_MBOX = ROOT / "toolchains" / "examples" / "rmqueue-always-inline.mbox"
EXAMPLE_TOOLCHAINS = "gcc-12,clang-19"


def sizewatch_cmd() -> list[str]:
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "cli"]


@pytest.fixture(scope="session")
def example_store(example_series, tmp_path_factory):
    """One real ``sizewatch run --series examples/... --toolchains gcc-12,clang-19`` into a fresh store,
    shared by the pipeline's and the dashboard's tests: (store path, the run's CompletedProcess).
    Objects come from the example_series cache, so the run spends its time in the pipeline."""
    for tc in EXAMPLE_TOOLCHAINS.split(","):
        example_series(tc)
    db = tmp_path_factory.mktemp("example-store") / "store.db"
    proc = subprocess.run([*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), "--toolchains", EXAMPLE_TOOLCHAINS,
                           "--db", str(db)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"sizewatch run of the example series failed:\n{proc.stderr}")
    return db, proc


@pytest.fixture(scope="session")
def output_dir() -> Path:
    """Where tests leave artifacts for humans (screenshots, reports)."""
    OUTPUT.mkdir(exist_ok=True)
    return OUTPUT


# --- PostgreSQL (issue 16): a real server per session, a fresh database per test -------------------

@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL 15 server on a unix socket in a temporary directory (tests/pgserver.py), stopped at the end."""
    from pgserver import PgServer
    try:
        server = PgServer()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server):
    """The URL of a new, empty database on the session's server (dropped after the test)."""
    url = pg_server.database()
    yield url
    pg_server.drop(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_db(request, tmp_path):
    """Where a store test keeps its store: an sqlite file, or an empty PostgreSQL database (its URL).
    The same test runs on both."""
    if request.param == "sqlite":
        return tmp_path / "s.db"
    return request.getfixturevalue("pg_url")


@pytest.fixture(scope="session")
def example_pg_store(example_series, pg_server):
    """The example series run by ``sizewatch run --db postgresql://...`` (the pipeline writing to
    PostgreSQL itself): (database name, the run's CompletedProcess). Tests take copies
    (``pg_server.database(template=...)``) and leave this one untouched."""
    for tc in EXAMPLE_TOOLCHAINS.split(","):
        example_series(tc)
    url = pg_server.database()
    proc = subprocess.run([*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), "--toolchains", EXAMPLE_TOOLCHAINS,
                           "--db", url], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"sizewatch run of the example series into PostgreSQL failed:\n{proc.stderr}")
    return url.rsplit("/", 1)[1], proc


# --- the libdw engine --------------------------------------------------------------------------
# analyzer/dwarf/_libdw.c is built by setup.py wherever libdw-dev is installed (scripts/install.sh
# installs it). There its absence is a failure, never a skip: a build that quietly dropped the
# extension would otherwise leave CI green with the fast engine untested. Tests of the engine take
# the mark (``NATIVE`` in an engine list) or, looping over engines inside one test, ask libdw_built().
LIBDW_HEADER = Path("/usr/include/elfutils/libdw.h")
NATIVE = pytest.param("native", marks=pytest.mark.libdw)


def libdw_built() -> bool:
    """True when the libdw extension is built; False where it cannot be (no libdw-dev here: the
    caller leaves the engine out); a test failure where libdw-dev is installed and it is missing."""
    from analyzer.dwarf import native
    if native.available():
        return True
    if LIBDW_HEADER.is_file():
        pytest.fail(f"libdw-dev is installed ({LIBDW_HEADER}) but the libdw extension analyzer.dwarf._libdw "
                    "is not built: rerun scripts/install.sh, or `python setup.py build_ext --inplace` in the "
                    "checkout", pytrace=False)
    return False


OPT_IN = ("defconfig", "arm64_clang")


def pytest_collection_modifyitems(config, items):
    """The opt-in tests run only when ``-m`` names their marker: ``defconfig`` (a 21-minute kernel
    build each), ``arm64_clang`` (a second arm64 kernel build): any other ``-m`` (``-m slow``,
    ``-m "not kernel"``) replaces setup.cfg's, and must not pull them in."""
    off = [m for m in OPT_IN if m not in (config.option.markexpr or "")]
    if not off:
        return
    keep, drop = [], []
    for item in items:
        (drop if any(item.get_closest_marker(m) for m in off) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # before any fixture is built: a skip only where libdw-dev is not installed and nothing is built
    if item.get_closest_marker("libdw"):
        from analyzer.dwarf import native
        if not native.available() and not LIBDW_HEADER.is_file():
            pytest.skip("libdw extension not built (libdw-dev not installed)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if item.get_closest_marker("libdw"):
        libdw_built()

"""The optional native DWARF reader (analyzer/dwarf/_libdw.c over elfutils' libdw), and the
dashboard's chart libraries from npm.

Everything else is in setup.cfg. The extension is optional: where libdw's headers are missing
(no ``libdw-dev``), the build goes on without it and sizewatch reads DWARF with its pure-Python
walker (analyzer.dwarf.native.available() says which).

Chart.js and ECharts are package data under web/node_modules, which only ``npm ci`` makes: a
build from a clean tree (a git clone, ``pip install git+URL``, an sdist made from a clone) runs
``npm ci`` in web/ before setuptools lists the package data (egg_info, which sdist and the
wheel's metadata both run first), so the sdist and the wheel carry them. An sdist already holds
them and builds without npm.
"""
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info

WEB = Path(__file__).resolve().parent / "web"
CHART_FILES = ("node_modules/chart.js/dist/chart.umd.min.js", "node_modules/chart.js/LICENSE.md",
               "node_modules/echarts/dist/echarts.min.js", "node_modules/echarts/LICENSE")


def npm_ci() -> None:
    """web/node_modules' chart files, from web/package-lock.json, unless they are there already."""
    if all((WEB / f).is_file() for f in CHART_FILES):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm not found: the dashboard's chart libraries come from npm (install nodejs/npm)")
    got = subprocess.run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], cwd=WEB,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if got.returncode:
        last = (got.stderr.strip().splitlines() or [f"exit status {got.returncode}"])[-1]
        raise SystemExit(f"npm ci in web/ failed: {last}")
    missing = [f for f in CHART_FILES if not (WEB / f).is_file()]
    if missing:
        raise SystemExit(f"npm ci in web/ did not install {', '.join(missing)} (web/package.json)")


class EggInfoWithCharts(egg_info):
    def run(self):
        npm_ci()
        super().run()


class BuildPyWithCharts(build_py):
    def run(self):
        npm_ci()
        super().run()


setup(cmdclass={"egg_info": EggInfoWithCharts, "build_py": BuildPyWithCharts},
      ext_modules=[Extension("analyzer.dwarf._libdw", sources=["analyzer/dwarf/_libdw.c"],
                             libraries=["dw", "elf"], optional=True,
                             extra_compile_args=["-O2", "-Wall"])])

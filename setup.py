"""The optional native DWARF reader (analyzer/dwarf/_libdw.c over elfutils' libdw).

Everything else is in setup.cfg. The extension is optional: where libdw's headers are missing
(no ``libdw-dev``), the build goes on without it and sizewatch reads DWARF with its pure-Python
walker (analyzer.dwarf.native.available() says which).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("analyzer.dwarf._libdw", sources=["analyzer/dwarf/_libdw.c"],
                             libraries=["dw", "elf"], optional=True,
                             extra_compile_args=["-O2", "-Wall"])])

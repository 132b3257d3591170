# The two commands of the README. Both install what they need first (scripts/install.sh).
.PHONY: install run test bench

install:
	@bash scripts/install.sh

run: install
	.venv/bin/sizewatch example

test: install
	.venv/bin/python -m pytest -q -rs

bench: install
	.venv/bin/python bench/sizediff_bench.py

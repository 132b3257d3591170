# The two commands of the README. Both install what they need first (scripts/install.sh).
.PHONY: install run runtime test bench

# where `make run` serves the dashboard (the Dockerfile sets 0.0.0.0 so that a published port reaches it)
SERVE_HOST ?= 127.0.0.1

install:
	@bash scripts/install.sh

run: install
	.venv/bin/sizewatch run --series toolchains/examples/rmqueue-always-inline.mbox \
	    --toolchains gcc-11,gcc-12,clang-14,clang-16,clang-19 --targets mm/page_alloc.o
	@echo
	@echo "Results are stored in $$(.venv/bin/python -c 'from db.store import default_path; from db.dialect import redact; print(redact(str(default_path())))')."
	@echo "Ask the store:      .venv/bin/sizewatch history get_page_from_freelist --toolchain clang-19"
	@echo "The fast path at run time (executed instructions per alloc/free pair, the kernel booted under QEMU;"
	@echo "builds the allocator kernel under gcc-12 and clang-19, ~10 more minutes the first time): make runtime"
	@if [ -t 0 ]; then \
	    echo "Starting the dashboard: open http://127.0.0.1:5000/ in a browser (Ctrl-C stops it)"; \
	    .venv/bin/sizewatch serve --host $(SERVE_HOST) --port 5000; \
	else \
	    echo "Open the dashboard: .venv/bin/sizewatch serve   (then http://127.0.0.1:5000/)"; \
	fi

# the README's second example: the series' allocator vmlinux under gcc-12 and clang-19, each booted
# under QEMU TCG and measured (issue 26), the page_bench table per patch in the report
runtime: install
	.venv/bin/sizewatch run --series toolchains/examples/rmqueue-always-inline.mbox \
	    --toolchains gcc-12,clang-19 --targets vmlinux --config allocator --measure

test: install
	.venv/bin/python -m pytest -q -rs --durations=30

bench: install
	.venv/bin/python bench/sizediff_bench.py

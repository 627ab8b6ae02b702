# The two commands a newcomer runs: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: test check demo lint typecheck bench bench-detail clean

# --no-compile: the tests import a fraction of the ten thousand modules installed,
# each compiled when first imported; compiling all of them up front was over 40% of the
# install (76 s against 43 s on this project's 2-core machine).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=constraints.txt $(BIN)/python -m pip install -q --no-compile -e ".[dev]"
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy src

test: lint typecheck
	$(BIN)/python -m pytest -n 2

# The fast lane while developing: everything but the tests marked slow.
check: lint typecheck
	$(BIN)/python -m pytest -n 2 -m "not slow" -x

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# Every contender in one run (the published 0.5.0 is installed into .bench/ on first use):
# one table, also written to docs/benchmarks.md.
bench: $(STAMP)
	$(BIN)/python bench/harness.py

# The per-topic scripts (token accuracy, outbox cost, trim details, ...).
bench-detail: $(STAMP)
	@for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .bench .mypy_cache .pytest_cache .ruff_cache build dist

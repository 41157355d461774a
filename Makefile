# Two commands for a fresh machine: `make demo` and `make test`. Both create or update .venv from
# pyproject.toml when needed (quick when up to date) and check for Java 17+.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean java

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[embedded,test]"
	@touch $(STAMP)

java:
	@./scripts/check_java.sh

demo: java $(STAMP)
	$(VENV)/bin/zkconsumer demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: java lint
	$(PY) -m pytest -q

bench: java $(STAMP)
	$(PY) benchmarks/bench_fetch.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis

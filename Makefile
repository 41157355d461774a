# Two commands for a fresh machine: `make demo` and `make test`. Both create or update .venv from
# pyproject.toml when needed (quick when up to date) and check for Java 17+.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo lesson test check lint typecheck bench bench-lab clean java jvm mutate mutate-report interop chaos-smoke

# A VENV of another checkout is refused: installing this one into it would move its editable install here.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -I -c "import importlib.util, pathlib, sys; s = importlib.util.find_spec('zkconsumer'); \
	o = s and s.origin and pathlib.Path(s.origin).resolve().parents[1]; \
	sys.exit(o and o != pathlib.Path.cwd().resolve() and f'{sys.argv[1]} has zkconsumer installed from {o}: use a \
	venv of this checkout (VENV=.venv), or installing here would move that one' or 0)" "$(VENV)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[all,test]"
	@touch $(STAMP)

java:
	@./scripts/check_java.sh

# Apache Kafka 3.9 (the embedded broker) and the original 0.8.2.2 release, declared in zkconsumer/embedded/jvm/pom.xml:
# resolved from Maven Central once into ~/.cache/zkconsumer/jvm (or $$ZKCONSUMER_JVM_CACHE), verified and reused
# offline afterwards (docs/servers.md). Then the analysis driver's class-data archive, made once per java and Spark
# install by a training analysis (docs/analysis.md, "The class-data archive").
jvm: java $(STAMP)
	@$(PY) -m zkconsumer.embedded.jvm
	@$(PY) -m zkconsumer.lab.analysis.class_archive

demo: jvm
	$(VENV)/bin/zkconsumer demo

# The guided lab's page (docs/exercises.md, docs/lesson.md): the short lesson scenario on every design this machine
# runs, four generations (the lab run starts and stops its own ZooKeeper and brokers), then one page replaying its
# membership change step by step in each.
LESSON_OUT ?= .zkconsumer/lesson

lesson: jvm
	rm -rf $(LESSON_OUT)
	$(VENV)/bin/zkconsumer lab run lesson --design all --out $(LESSON_OUT)
	$(VENV)/bin/zkconsumer lab lesson $(LESSON_OUT) --out $(LESSON_OUT)/lesson.html

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The type check (docs/testing.md, "The type check"): mypy, strict, over rebalance/, fetcher_manager/ and
# zkconsumer/zookeeper/
# (settings in pyproject.toml [tool.mypy]); seconds cold, under one with its cache in .mypy_cache/.
typecheck: $(STAMP)
	$(VENV)/bin/mypy

# Each test's time goes to .zkconsumer/test-report.xml: `benchmarks/suite_durations.py` makes docs/testing.md's
# per-file table from it. Two pytest-xdist workers (the suite waits more than it computes), each unit (a file, or
# tests/analysis or tests/lesson whole) on one worker, the units that start servers first (tests/work_units.py;
# docs/testing.md, "Workers", which says why not three).
TEST_WORKERS ?= 2

test: jvm lint typecheck
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --junitxml=.zkconsumer/test-report.xml

# The quick loop (docs/testing.md, "Tiers"): ruff, the type check and the tests that start no server or other process,
# no Java needed; under a minute on two cores. `make test` runs everything, as CI does.
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not slow and not ensemble and not interop"

# The differential tests against the original Kafka 0.8.2.2 consumer (docs/interop.md): all of tests/interop, alone
# (`make test` runs them too). Needs a JDK: javac compiles the driver into the JVM cache on first use.
interop: jvm
	$(PY) -m pytest -q -m interop tests/interop

bench: jvm
	$(PY) benchmarks/bench_fetch.py

# The lab's Spark side at scale (docs/analysis.md, docs/simulation.md): the analysis of 1,000,000 generated trace
# events, then the simulated sweep up to N = 10,000 members, both on local[2]; each prints its seconds and peak memory.
bench-lab: $(STAMP)
	$(PY) benchmarks/bench_analysis.py
	$(PY) benchmarks/bench_sim.py

# The fault campaign's short run (docs/chaos.md): 10 faults against a group of 4 on 3 ZooKeeper servers and 3 brokers,
# then the checkers over its history; prints the table and the number of violations (exit 1 if any).
CHAOS_OUT ?= .zkconsumer/chaos-smoke

chaos-smoke: jvm
	rm -rf $(CHAOS_OUT)
	$(VENV)/bin/zkconsumer lab chaos --faults 10 --seed 1 --out $(CHAOS_OUT)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis

# Mutation testing (docs/mutation.md; settings in pyproject.toml [tool.mutmut]): mutmut mutates rebalance/ and
# zkconsumer/zookeeper/ and runs the unit-test layer (no Java, no servers) against every mutant, in mutants/.
# Starts from scratch each time: mutmut's cache keeps old verdicts when only tests change, so a reused mutants/ could
# report a mutant as surviving that the current tests kill. Not part of `make test`.
#   make mutate MUTATE_JOBS=4                      parallel workers (default: one per core)
#   make mutate MUTANTS='rebalance.offsets.*'      only the mutants matching these mutmut name globs
MUTATE_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MUTANTS ?=

mutate: $(STAMP)
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children $(MUTATE_JOBS) $(MUTANTS)
	@$(MAKE) --no-print-directory mutate-report

# The report of the last run: per-file table, then every surviving mutant as a one-line diff; JSON in .mutation/.
mutate-report: $(STAMP)
	$(PY) scripts/mutation_report.py --json .mutation/report.json

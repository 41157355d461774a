"""The Spark forms the per-run Python (zkconsumer/lab/analysis/per_run/) is checked against, kept as an independent
second implementation; the product never imports them.

The analysis job computes every per-run table in plain Python over Arrow, one grouped map per run. Before that,
the job computed them with the Spark DataFrame code kept here: each module is the part of the product module of
the same name (zkconsumer/lab/analysis/<module>.py) that moved out of it, unchanged, with its docstrings; the
constants, schemas and definitions they read stay in the product and are imported from there. The tests hold each
per-run function's rows equal to its namesake's here (tests/analysis/test_per_run_*.py, per_run_reference.py),
on the fixed set, the hand-built runs and runs written for the rules' edges: two implementations of one rule,
written apart, that must agree (differential testing).

tests/analysis/test_oracle_apart.py checks that no module under zkconsumer/ imports this package.
"""

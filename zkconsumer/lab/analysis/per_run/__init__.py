"""The analysis of one run, in Python over Arrow: what the job computes per run, as one grouped map on the
executors (docs/analysis.md, "How the job runs").

A run's records arrive as one Arrow table (`RunRecords`: the parsed trace fields, readers.RECORD_FIELDS, of one
run). Each module here is one family of the per-run tables, a pure function of those records and of what earlier
families found (the run's windows, its ownership events): time frame (frame.py), ownership (ownership.py), wire and
members' counts (counts.py), and the tables per change and per run that join them (tables.py). Rows are dicts
keyed by the Spark schema's field names, so the job's output frame is built from them without renaming.

The tests hold every family equal, table by table, to a Spark form of the same rules written apart: the job's
former Spark DataFrame code, kept as a test oracle in tests/analysis/spark_oracle/ (a module per product module,
named as the product module whose rules it computes). The product never imports it.
"""

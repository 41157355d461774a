"""The lab's PySpark analysis job: run directories (docs/traces.md) in, Parquet tables and an HTML report out
(docs/analysis.md). The entry points are in ``job`` (``analyze``, ``AnalysisResult``, ``main``).

The package re-exports nothing: an import of job.py here would run it twice under `python -m
zkconsumer.lab.analysis.job` or spark-submit (once as this package's, once as __main__), and every module of the
package that imports it would close an import cycle through it.
"""

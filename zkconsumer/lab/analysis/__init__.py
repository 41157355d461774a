"""The lab's PySpark analysis job: run directories (docs/traces.md) in, Parquet tables and an HTML report out
(docs/analysis.md)."""

from __future__ import annotations

from typing import Any

__all__ = ["AnalysisResult", "analyze", "main"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `python -m zkconsumer.lab.analysis.job` does not import job.py twice (once as the package's,
    # once as __main__).
    if name in __all__:
        from zkconsumer.lab.analysis import job

        return getattr(job, name)
    raise AttributeError(name)

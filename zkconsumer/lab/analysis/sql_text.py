"""Spark SQL text for expressions the job hands to Spark whole (`F.expr`, `selectExpr`) rather than building them
a call at a time through the Column API, where every call is a py4j round trip to the JVM (docs/analysis.md,
"What the job costs")."""

from __future__ import annotations


def literal(text: str) -> str:
    """`text` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quoted(identifier: str) -> str:
    """`identifier` as a Spark SQL quoted identifier (a column or struct field name)."""
    return "`" + identifier.replace("`", "``") + "`"

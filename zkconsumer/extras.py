"""The optional parts of zkconsumer and the pip extra that installs each (pyproject.toml; docs/DESIGN.md, Imports).

`pip install zkconsumer` is the consumer, its CLI and the embedded cluster; these need more:

    lab     `zkconsumer lab`, `zkconsumer demo` (the main job), `cluster up --kraft`: Spark, Arrow, pandas, numpy,
            greenlet (the simulation),
            plotly, pydantic, confluent-kafka
    watch   the live view of `zkconsumer watch` (textual); `watch --once` needs nothing more
    tls     `cluster up --tls`: the throw-away CA and server certificate (cryptography)
    all     the three

Every entry point that needs an extra calls `require` before importing anything of it, so a missing extra is one line
naming the extra to install (a `UserError`: the CLI prints it alone and exits 1), never an ImportError's traceback.
Only top-level module names are looked up (`importlib.util.find_spec`), nothing is imported.

`load` is the product's one door into the lab: no module outside zkconsumer/lab imports it, the CLI names the lab's
entry points as `module:attr` strings that `load` imports on use (tests/test_import_rules.py holds both).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from zkconsumer.errors import UserError

# The import names each extra brings (pyproject.toml's [project.optional-dependencies], by import name).
EXTRAS: dict[str, tuple[str, ...]] = {
    "lab": ("pyspark", "pyarrow", "pandas", "numpy", "greenlet", "plotly", "pydantic", "confluent_kafka"),
    "watch": ("textual",),
    "tls": ("cryptography",),
}


class MissingExtraError(UserError):
    """A command needs an extra that is not installed."""

    def __init__(self, what: str, extra: str, module: str, note: str = "") -> None:
        super().__init__(f"{what} needs the '{extra}' extra: pip install 'zkconsumer[{extra}]'"
                         + (f" ({note})" if note else ""))
        self.extra = extra
        self.module = module  # the first of its modules found missing


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def missing(extra: str) -> str | None:
    """The first import name of `extra` that is not installed, or None when the extra is complete."""
    return next((module for module in EXTRAS[extra] if not _installed(module)), None)


def require(extra: str, what: str, note: str = "") -> None:
    """Raise MissingExtraError ("`what` needs the 'extra' extra: pip install ... (`note`)") unless `extra` is
    installed."""
    module = missing(extra)
    if module is not None:
        raise MissingExtraError(what, extra, module, note)


def load(target: str, extra: str | None = None, what: str = "", note: str = "") -> Any:
    """The object `target` ("package.module:attr") names, imported now; with `extra`, `require(extra, what, note)`
    first."""
    if extra is not None:
        require(extra, what or target, note)
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)

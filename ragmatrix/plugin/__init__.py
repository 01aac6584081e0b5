"""The pytest plugin of ragmatrix, registered through the `pytest11` entry point.

Installing the package is enough: pytest loads this module in every run of the environment.
Its hooks stay idle unless the run collects the benchmark folder (`benchmark/` by default).

pytest rewrites the asserts of every package of a distribution that declares a `pytest11`
entry point, so that a failing assert in a plugin's helpers explains itself. The package's
modules hold no such asserts, and rewriting them (parsing each one, walking its tree and
compiling it again) costs every run whose bytecode is not cached about 0.15 s of CPU before
its first request. They are imported plainly instead: `_PlainImports` finds them ahead of
pytest's hook. Benchmark test modules and conftest files are rewritten as usual.
"""

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

# Every module of the package, not only this layer's: pytest marks the whole distribution.
_PACKAGE = __name__.partition(".")[0] + "."


class _PlainImports(importlib.abc.MetaPathFinder):
    """Finds the package's own modules the way Python would without pytest."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is None or not fullname.startswith(_PACKAGE):
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, path, target)


if not any(isinstance(finder, _PlainImports) for finder in sys.meta_path):
    sys.meta_path.insert(0, _PlainImports())

from ragmatrix.plugin.fixtures import embedder, evaluator, judge, llm, record, reranker, retriever  # noqa: E402
from ragmatrix.plugin.hooks import (  # noqa: E402
    pytest_addhooks,
    pytest_addoption,
    pytest_cmdline_main,
    pytest_collect_file,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_configure_node,
    pytest_generate_tests,
    pytest_itemcollected,
    pytest_pyfunc_call,
    pytest_report_collectionfinish,
    pytest_report_header,
    pytest_report_teststatus,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
    pytest_runtest_setup,
    pytest_runtestloop,
    pytest_sessionstart,
    pytest_xdist_make_scheduler,
)

__all__ = [
    "embedder",
    "evaluator",
    "judge",
    "llm",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_cmdline_main",
    "pytest_collect_file",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_itemcollected",
    "pytest_pyfunc_call",
    "pytest_report_collectionfinish",
    "pytest_report_header",
    "pytest_report_teststatus",
    "pytest_sessionstart",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtestloop",
    "pytest_xdist_make_scheduler",
    "record",
    "reranker",
    "retriever",
]

"""ragmatrix: a pytest plugin that benchmarks the models behind retrieval-augmented generation.

`pytest_plugins = ["plugin"]` in a conftest registers everything below.
"""

from plugin.fixtures import embedder, evaluator, judge, llm, record, retriever
from plugin.hooks import (
    pytest_addhooks,
    pytest_addoption,
    pytest_collect_file,
    pytest_configure,
    pytest_configure_node,
    pytest_generate_tests,
    pytest_pyfunc_call,
    pytest_report_header,
    pytest_report_teststatus,
    pytest_runtest_makereport,
    pytest_sessionstart,
)
from plugin.outcome import Outcome

__all__ = [
    "Outcome",
    "embedder",
    "evaluator",
    "judge",
    "llm",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_pyfunc_call",
    "pytest_report_header",
    "pytest_report_teststatus",
    "pytest_sessionstart",
    "pytest_runtest_makereport",
    "record",
    "retriever",
]

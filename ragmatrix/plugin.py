"""The pytest plugin of ragmatrix, registered through the `pytest11` entry point.

Installing the package is enough: pytest loads this module in every run of the environment.
Its hooks stay idle unless the run collects the benchmark folder (`benchmark/` by default).
"""

from ragmatrix.fixtures import embedder, evaluator, judge, llm, record, retriever
from ragmatrix.hooks import (
    pytest_addhooks,
    pytest_addoption,
    pytest_collect_file,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_configure_node,
    pytest_generate_tests,
    pytest_pyfunc_call,
    pytest_report_collectionfinish,
    pytest_report_header,
    pytest_report_teststatus,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
    pytest_runtest_setup,
    pytest_sessionstart,
)

__all__ = [
    "embedder",
    "evaluator",
    "judge",
    "llm",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_pyfunc_call",
    "pytest_report_collectionfinish",
    "pytest_report_header",
    "pytest_report_teststatus",
    "pytest_sessionstart",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "record",
    "retriever",
]

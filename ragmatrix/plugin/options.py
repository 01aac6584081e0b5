"""The plugin's command-line options and ini settings.

Declared by the entry point itself (`ragmatrix.plugin`) in every pytest run of the environment,
so that `pytest --help` lists them and a command line naming them parses, whether or not the
run collects the benchmark: this module imports nothing of the benchmark's machinery.
"""

from __future__ import annotations

import pytest

from ragmatrix.suite import DEFAULT_MAX_VARIANTS

_HELP_MODELS = "comma-separated model ids from benchmark/models.yaml to run (default: all available)"
_HELP_MAX_VARIANTS = f"the most items one case may expand to (default {DEFAULT_MAX_VARIANTS})"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragmatrix", "ragmatrix benchmark")
    group.addoption("--run-all", action="store_true", help="rerun every item, replacing stored results")
    group.addoption("--models", default=None, help=_HELP_MODELS)
    group.addoption(
        "--evaluator", default=None, help="id of the LLM in models.yaml that checks answers no rule can check"
    )
    group.addoption("--iterations", type=int, default=None, help="repeat each item N times (default 1)")
    group.addoption("--results-dir", default=None, help="read and write results here (default benchmark/results)")
    group.addoption(
        "--send-ahead",
        type=int,
        default=256,
        metavar="N",
        help="send about N model requests ahead of the items at a time (default 256); a killed run loses at most these",
    )
    group.addoption(
        "--compare-variants",
        action="store_true",
        help="in the summary, test each model's variants (chunkings, prompt wordings) against each other",
    )
    group.addoption(
        "--no-response-cache",
        action="store_true",
        help="ask the models again instead of replaying cached responses and embeddings",
    )
    group.addoption("--max-variants", type=int, default=None, help=_HELP_MAX_VARIANTS)
    group.addoption(
        "--shard",
        default=None,
        metavar="K/N",
        help="run part K of N deterministic parts of the matrix (one per machine; join them with ragmatrix merge)",
    )
    parser.addini("benchmark_dir", "folder holding test_<family>.py, models.yaml and data/", default="benchmark")
    parser.addini("max_variants", _HELP_MAX_VARIANTS, default=str(DEFAULT_MAX_VARIANTS))

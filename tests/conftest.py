"""Shared fixtures for the plugin's own tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from project import RAG_TEST_MODULE, SMALL_CASES, models_yaml, write

from ragmatrix.foundations.context import RunContext, start_run
from ragmatrix.models import aio
from ragmatrix.testing.openai_server import OpenAIServer

pytest_plugins = ["pytester"]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

# In-process pytester runs drop the modules a run imported. C extensions such as numpy
# cannot be imported twice in one process, and litellm takes seconds to import: importing
# them here keeps them across runs. (Nothing of the package needs this: each run keeps what it
# found, families and providers included, in its own context.)
import numpy  # noqa: E402,F401
import scipy.stats  # noqa: E402,F401

from ragmatrix.models.providers.litellm_chat import import_litellm  # noqa: E402

import_litellm()

# The plugin's hooks and fixtures load only in a run that collects a benchmark, and this run of
# the tests collects none: imported here, they outlive each in-process run, so that a test that
# patches one of their modules patches the module the run it starts uses.
import ragmatrix.plugin.fixtures  # noqa: E402,F401
import ragmatrix.plugin.hooks  # noqa: E402,F401

# A run's summary imports the report's cost module; the run drops it from sys.modules, but the
# package attribute `ragmatrix.report.cost` stays. A report written by the test afterwards then
# mixes that module (reached as `from ragmatrix.report import cost`) with a fresh import of it,
# and every cost figure reads as not measured. Imported here, there is only one.
import ragmatrix.report.cost  # noqa: E402,F401


@pytest.fixture
def fresh_run(tmp_path) -> Iterator[RunContext]:
    """A run of the test's own (`ragmatrix.foundations.context`), rooted at its temporary folder: nothing
    another test's code remembered (corpora, indexes, registries) is seen, and its end closes
    what it made."""
    with start_run(tmp_path) as run:
        yield run


@pytest.fixture
def fresh_event_loop() -> Iterator[None]:
    yield
    aio.close()


@pytest.fixture
def dense_words_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `dense_words` test provider (`tests/dense_words.py`) registered for this test only."""
    import dense_words as module

    from ragmatrix.models import providers

    providers.providers()  # the package's own registered before the copy
    monkeypatch.setattr(providers, "_providers", dict(providers._providers))
    module.register()


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def bench(pytester: pytest.Pytester, server: OpenAIServer) -> pytest.Pytester:
    """A benchmark project in a temporary folder: the RAG module, three small cases, a
    scripted LLM on the local server and the bag-of-words embedder."""
    pytester.makeini("[pytest]\n")
    (pytester.path / "benchmark" / "data").mkdir(parents=True)
    write(pytester.path / "benchmark" / "test_rag_interpretation.py", RAG_TEST_MODULE)
    write(pytester.path / "benchmark" / "data" / "rag_interpretation_data.yaml", SMALL_CASES)
    write(pytester.path / "benchmark" / "models.yaml", models_yaml(server.base_url))
    return pytester

"""The fixtures a benchmark test takes: a model of the kind it needs, and `record`.

`llm`, `embedder`, `judge`, `retriever` and `reranker` are parametrized indirectly by the plugin with model specs;
the model itself is built here, once per process, when the first test that needs it runs,
never at collection. Their types are the protocols of `ragmatrix.models.protocols`.
`evaluator` holds nothing of one item, so it is made once per session instead of being set up
and torn down for every item; `record` stays per item, so that no outcome outlives its item.
"""

from __future__ import annotations

from typing import cast

import pytest

from ragmatrix.models.protocols import ChatModel, Embedder, Judge, Model, Reranker, Retriever
from ragmatrix.plugin.runner import Recorder
from ragmatrix.plugin.session import get_state
from ragmatrix.suite.evaluator import Evaluator


def _build(request: pytest.FixtureRequest) -> Model:
    spec = getattr(request, "param", None)
    if spec is None:
        pytest.fail(
            f"'{request.fixturename}' is parametrized only in benchmark/test_<family>.py modules", pytrace=False
        )
    return get_state(request.config).registry.build(spec)


@pytest.fixture
def llm(request: pytest.FixtureRequest) -> ChatModel:
    """An LLM from models.yaml."""
    return cast(ChatModel, _build(request))


@pytest.fixture
def embedder(request: pytest.FixtureRequest) -> Embedder:
    """An embedding model from models.yaml."""
    return cast(Embedder, _build(request))


@pytest.fixture
def judge(request: pytest.FixtureRequest) -> Judge:
    """Any model that can compare: an LLM, an ensemble of LLMs, an embedder or a retriever."""
    return cast(Judge, _build(request))


@pytest.fixture
def retriever(request: pytest.FixtureRequest) -> Retriever | Reranker:
    """Any model that ranks documents for a query: an embedder, or a retriever such as BM25.
    Both offer `similarities(query, documents)`, `score_matrix(queries, documents)` and
    `index_documents(documents).score(queries)`. A reranker with a `first_stage` is a two-stage
    system: `ragmatrix.models.two_stage.stages` takes it apart."""
    return cast(Retriever | Reranker, _build(request))


@pytest.fixture
def reranker(request: pytest.FixtureRequest) -> Reranker:
    """A reranker: `rerank(query, documents)` gives one relevance per document (None where the
    model gave no valid one). One with a `first_stage` reranks that model's best `top_n`."""
    return cast(Reranker, _build(request))


@pytest.fixture(scope="session")
def evaluator(request: pytest.FixtureRequest) -> Evaluator:
    """The evaluator LLM (`--evaluator ID` or `evaluator:` in models.yaml), built on first use.
    Items that need it are keyed by its fingerprint and prompt, and skipped without it."""
    state = get_state(request.config)
    return Evaluator(state.evaluator, state.registry.build)


@pytest.fixture
def record() -> Recorder:
    """Call `record(outcome)` once per iteration with the scored outcome."""
    return Recorder()

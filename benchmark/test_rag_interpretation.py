"""RAG interpretation: can a model tell whether retrieved fragments help answer a question?

Cases: benchmark/data/rag_interpretation_data.yaml. The family: plugin/families/rag.py.
"""

import pytest

from plugin.families import rag


def test_rag_interpretation(llm, case, record):
    """An LLM reads the fragments and judges them, or answers from them."""
    answer = llm.chat(rag.messages(case))
    record(rag.score(case, answer))


@pytest.mark.cases(where=rag.is_explicit)
def test_rag_interpretation_by_similarity(embedder, case, record):
    """An embedder calls a fragment relevant when it is close enough to the question."""
    similarities = embedder.similarities(case.input.prompt, case.input.fragment_texts)
    record(rag.judge_by_similarity(case, similarities))

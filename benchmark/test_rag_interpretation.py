"""RAG interpretation: can a model tell whether retrieved fragments help answer a question?

Cases: benchmark/data/rag_interpretation_data.yaml. The family: ragmatrix/families/rag.py.
"""

import pytest

from ragmatrix.families import rag


def test_rag_interpretation(llm, case, evaluator, record):
    """An LLM reads the fragments and judges them, or answers from them; an answer that no
    rule can check is judged by the evaluator LLM."""
    answer = rag.ask(llm, case)
    instruction = rag.evaluator_instruction(case, evaluator.instruction)
    if instruction is None:
        record(rag.score(case, answer))
    else:
        verdict = evaluator.chat(rag.evaluator_messages(case, answer, instruction))
        record(rag.score_by_evaluator(case, answer, verdict))


@pytest.mark.cases(where=rag.judges_relevance)
def test_rag_interpretation_by_similarity(embedder, case, record):
    """An embedder calls a fragment relevant when it is close enough to the question."""
    record(rag.judge_by_similarity(case, rag.similarities(embedder, case)))

"""RAG interpretation scoring: normalisation, yes/no parsing, implicit checks, the embedder judge."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragmatrix.families import rag


def case(**expected):
    return SimpleNamespace(expected=rag.RagExpected(**expected))


@pytest.mark.parametrize(
    ("answer", "normalised"),
    [("Yes.", "yes"), ("  NO!\n", "no"), ("yes...", "yes"), ("No, it is not.", "no, it is not")],
)
def test_normalise_lowercases_and_strips_trailing_punctuation(answer, normalised):
    assert rag.normalise(answer) == normalised


@pytest.mark.parametrize(
    ("answer", "parsed", "exact"),
    [
        ("yes", "yes", True),
        ("No.", "no", True),
        ("Yes, the fragment is relevant.", "yes", False),
        ("yes and no", None, False),
        ("The fragment is relevant.", None, False),
        ("", None, False),
        ("yesterday", None, False),
    ],
)
def test_parse_yes_no(answer, parsed, exact):
    assert rag.parse_yes_no(answer) == (parsed, exact)


def test_explicit_scoring_counts_format_violations_apart():
    right = rag.score(case(answer="yes"), "Yes!")
    wrong = rag.score(case(answer="yes"), "no")
    violation = rag.score(case(answer="yes"), "It depends: yes or no.")
    assert (right.score, right.valid) == (1.0, True)
    assert (wrong.score, wrong.valid) == (0.0, True)
    assert (violation.score, violation.valid) == (0.0, False)


def test_implicit_answer_needs_all_keywords_no_forbidden_and_no_decline():
    expected = dict(behaviour="answer", keywords=["Canberra", ["1913", "nineteen thirteen"]], forbidden=["Sydney"])
    assert rag.score(case(**expected), "Canberra has been the capital since 1913.").score == 1.0
    assert rag.score(case(**expected), "Canberra, since nineteen thirteen").score == 1.0
    missing = rag.score(case(**expected), "Canberra is the capital.")
    assert missing.score == 0.0 and missing.details["missing"] == ["1913|nineteen thirteen"]
    assert rag.score(case(**expected), "Canberra (1913), not Sydney").score == 0.0
    assert rag.score(case(**expected), "I cannot answer this; maybe Canberra in 1913?").score == 0.0


def test_implicit_decline_and_empty_answers():
    decline = case(behaviour="decline", check="rules")
    assert rag.score(decline, "I cannot answer this from the provided fragments.").score == 1.0
    assert rag.score(decline, "The fragments don’t contain that.").score == 1.0
    assert rag.score(decline, "It is 42.").score == 0.0
    empty = rag.score(decline, "   ")
    assert (empty.score, empty.valid) == (0.0, False)


def test_the_similarity_judge_says_yes_at_the_threshold():
    threshold = rag.SIMILARITY_THRESHOLD
    assert rag.judge_by_similarity(case(answer="yes"), [0.1, threshold]).score == 1.0
    assert rag.judge_by_similarity(case(answer="yes"), [threshold - 0.01]).score == 0.0
    assert rag.judge_by_similarity(case(answer="no"), [threshold - 0.01]).score == 1.0


def test_messages_put_instruction_and_fragments_before_the_question():
    data = rag.RagInput(prompt="Q?", instruction="Judge.", fragments=["f1", "f2"])
    messages = rag.messages(SimpleNamespace(input=data))
    assert [m["role"] for m in messages] == ["system", "system", "system", "user"]
    assert [m["content"] for m in messages] == ["Judge.", "f1", "f2", "Q?"]
    biochatter = rag.RagInput(prompt="Q?", system_messages=["Judge.", "f1"])
    assert biochatter.fragment_texts == ["f1"] and biochatter.instruction_text == "Judge."


def test_the_shipped_cases_meet_the_coverage_the_family_promises():
    from pathlib import Path

    from ragmatrix.suite.loader import load_suite

    root = Path(__file__).resolve().parents[1]
    families = [path.stem[len("test_") :] for path in (root / "benchmark").glob("test_*.py")]
    suite = load_suite(root / "benchmark" / "data", families, root=root)
    assert not suite.problems, [p.line() for p in suite.problems]
    cases = {c.name: c for c in suite.cases["rag_interpretation"]}
    assert len(cases) >= 24
    assert len({c.metadata.get("domain") for c in cases.values()}) >= 3
    kinds = [(c.expected.answer, c.expected.behaviour) for c in cases.values()]
    assert kinds.count(("yes", None)) >= 5 and kinds.count(("no", None)) >= 5
    assert kinds.count((None, "answer")) >= 4 and kinds.count((None, "decline")) >= 4
    assert sum(len(c.input.fragment_texts) > 1 for c in cases.values()) >= 6
    variants = {}
    for c in suite.cases["rag_interpretation"]:
        variants.setdefault(c.name, set()).add(c.variant)
    assert sum(len(v) >= 3 for v in variants.values()) > len(variants) / 2


@pytest.mark.parametrize(
    ("expected", "answer", "score", "valid"),
    [
        ("decline", "Decline.", 1.0, True),
        ("decline", "answer", 0.0, True),
        ("decline", "maybe", 0.0, False),  # outside the answer/decline pair: a format violation
        ("Paris", "paris!", 1.0, True),  # any label; BioChatter strips only . ? !
        ("Paris", "London", 0.0, True),  # no known pair: simply wrong
        ("yes", "Yes, the fragment is relevant.", 0.0, False),
        ("yes", "yes;", 0.0, False),
    ],
)
def test_explicit_labels_match_exactly_after_biochatters_normalisation(expected, answer, score, valid):
    outcome = rag.score(case(answer=expected), answer)
    assert (outcome.score, outcome.valid) == (score, valid)


def test_the_tolerant_yes_no_reading_is_a_named_option():
    tolerant = rag.score(case(answer="yes", match="yes_no"), "Yes, the fragment is relevant.")
    assert (tolerant.score, tolerant.valid, tolerant.details["exact"]) == (1.0, True, False)
    with pytest.raises(ValueError, match="match: yes_no needs answer yes or no"):
        rag.RagExpected(answer="decline", match="yes_no")


def test_which_check_an_implicit_case_gets():
    assert rag.RagExpected(behaviour="answer").checked_by == "evaluator"
    assert rag.RagExpected(behaviour="decline").checked_by == "evaluator"
    assert rag.RagExpected(behaviour="decline", check="rules").checked_by == "rules"
    assert rag.RagExpected(behaviour="answer", keywords=["x"]).checked_by == "rules"
    assert rag.RagExpected(answer="yes").checked_by is None
    with pytest.raises(ValueError, match="checked by rules needs keywords"):
        rag.RagExpected(behaviour="answer", check="rules")
    with pytest.raises(ValueError, match="belong to implicit cases"):
        rag.RagExpected(answer="yes", keywords=["x"])
    with pytest.raises(ValueError, match="use score_by_evaluator"):
        rag.score(case(behaviour="answer"), "Canberra.")


def test_the_evaluator_prompt_and_verdict():
    data = rag.RagInput(prompt="What is the capital of Australia?", instruction="i", fragments=["f"])
    judged = SimpleNamespace(input=data, expected=rag.RagExpected(behaviour="decline"))
    own = SimpleNamespace(input=data, expected=rag.RagExpected(behaviour="decline", evaluator_instruction="Mine."))
    assert rag.evaluator_instruction(judged) == rag.DEFAULT_EVALUATOR_INSTRUCTION
    assert rag.evaluator_instruction(judged, "Set: {question}") == "Set: {question}"
    assert rag.evaluator_instruction(own, "Set.") == "Mine."
    assert rag.evaluator_instruction(case(answer="yes")) is None
    system, user = rag.evaluator_messages(judged, "I cannot say.", "Q: {question}")
    assert system == {"role": "system", "content": "Q: What is the capital of Australia?"}
    assert user == {"role": "user", "content": "I cannot say."}
    assert rag.score_by_evaluator(judged, "I cannot say.", "Decline!").score == 1.0
    assert rag.score_by_evaluator(judged, "Canberra.", "answer").score == 0.0
    violation = rag.score_by_evaluator(judged, "Canberra.", "The response answers.")
    assert (violation.score, violation.valid, violation.details["evaluator_violation"]) == (0.0, False, True)

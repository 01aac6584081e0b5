"""BioChatter's benchmark layout runs as it is: all six kinds of its RAG cases, with the model
and the evaluator LLM both on the local test server, reached through litellm.

The data file below follows BioChatter's published `benchmark_rag_test_data.yaml` layout
(explicit relevance with and without prompt variants, explicit evaluation of a statement, and
implicit relevance judged by an evaluator), in our own words.
"""

from __future__ import annotations

import json

import pytest
from project import assert_outcomes, write

from ragmatrix.families import rag

BIOCHATTER_LAYOUT = """
# The layout of BioChatter's RAG cases: the instruction and the fragments as system messages.
rag_interpretation:
  - case: explicit_relevance_no
    input:
      prompt: How far is the Moon from the Earth?
      system_messages:
        simple:
          [
            "Is this text fragment relevant to the user's question? Say 'yes' or 'no'. The fragment: ",
            "Sourdough bread rises because of wild yeast.",
          ]
        more_explicit:
          [
            "Is this text fragment relevant to the question? One word, 'yes' or 'no'. The fragment: ",
            "Sourdough bread rises because of wild yeast.",
          ]
        repeat_instruction:
          [
            "Say only 'yes' or 'no'. Is this text fragment relevant? Only 'yes' or 'no'. The fragment: ",
            "Sourdough bread rises because of wild yeast.",
          ]
    expected:
      answer: "no"

  - case: explicit_relevance_yes
    input:
      prompt: How far is the Moon from the Earth?
      system_messages:
        [
          "Is this text fragment relevant to the user's question? One word, 'yes' or 'no'. Fragment: ",
          "The Moon orbits the Earth at an average distance of about 384,400 km.",
        ]
    expected:
      answer: "yes"

  - case: explicit_evaluation_no
    input:
      prompt: "Sorry, the fragments I was given say nothing about the distance to the Moon."
      system_messages:
        [
          "The next message is a statement given in reply to this question: ",
          "How far is the Moon from the Earth? ",
          "Type 'answer' if the statement answers the question. ",
          "Type 'decline' if it declines to answer or apologises because the fragments were not relevant. ",
          "Type nothing but one of these two words. The statement: ",
        ]
    expected:
      answer: "decline"

  - case: explicit_evaluation_yes
    input:
      prompt: "The Moon is on average about 384,400 km away from the Earth."
      system_messages:
        [
          "The next message is a statement given in reply to this question: ",
          "How far is the Moon from the Earth? ",
          "Type 'answer' if the statement answers the question. ",
          "Type 'decline' if it declines to answer or apologises because the fragments were not relevant. ",
          "Type nothing but one of these two words. The statement: ",
        ]
    expected:
      answer: "answer"

  - case: implicit_relevance_no
    input:
      prompt: How far is the Moon from the Earth?
      system_messages:
        [
          "Use the following text fragments to answer the user's question where they are relevant. The fragments: ",
          "Sourdough bread rises because of wild yeast.",
          "The violin has four strings.",
          "Granite is an igneous rock.",
        ]
    expected:
      behaviour: "decline"

  - case: implicit_relevance_yes
    input:
      prompt: How far is the Moon from the Earth?
      system_messages:
        [
          "Use the following text fragments to answer the user's question where they are relevant. The fragments: ",
          "The Moon orbits the Earth at an average distance of about 384,400 km.",
          "At its closest, the perigee, the Moon is about 363,000 km away.",
        ]
    expected:
      behaviour: "answer"
"""

EVALUATOR_INSTRUCTION = "Judge whether this reply answers the question {question}. Say answer or decline."
LLM_ITEMS = 8  # explicit_relevance_no x3 variants, five more cases once each
BOW_ITEMS = 2  # the yes/no cases only, and the three instruction variants collapse into one


def models(api_base: str, evaluator: str = "evaluator: judge-llm\n") -> str:
    return f"""{evaluator}
models:
  - id: scripted
    kind: llm
    litellm: openai/scripted
    api_base: {api_base}
    timeout: 10
    retries: 1
  - id: judge-llm
    kind: llm
    litellm: openai/judge
    api_base: {api_base}
    timeout: 10
    retries: 1
  - id: bow
    kind: embedder
    builtin: bow
"""


def is_evaluator(messages: list[dict]) -> bool:
    first = str(messages[0]["content"])
    return "reply" in first or "response" in first


def model_answer(messages: list[dict]) -> str:
    """The tested model answers right; the evaluator (whose first message asks it to judge a
    reply) reads the reply and gives its verdict."""
    last = str(messages[-1]["content"])
    if is_evaluator(messages):
        return "Decline." if "sorry" in last.lower() else "answer"
    text = " ".join(str(m["content"]) for m in messages)
    if "statement" in text:
        return "decline" if "Sorry" in last else "answer"
    if "Use the following" in text:
        return "It is about 384,400 km." if "384,400" in text else "Sorry, the fragments do not say."
    return "Yes." if "384,400" in text else "no"


@pytest.fixture
def biochatter(bench, server):
    write(bench.path / "benchmark/data/rag_interpretation_data.yaml", BIOCHATTER_LAYOUT)
    write(bench.path / "benchmark/models.yaml", models(server.base_url))
    server.answer = model_answer
    return bench


def rows(pytester: pytest.Pytester) -> dict[tuple[str, str], dict]:
    path = pytester.path / "benchmark/results/rag_interpretation.jsonl"
    stored = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return {(r["model"], r["item"]): r for r in stored}


def evaluator_requests(server) -> list[dict]:
    return [r for r in server.requests if (r["body"] or {}).get("model") == "judge"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:cacheprovider", "--models", "scripted,bow", *args)


def test_all_six_kinds_run_unchanged_with_the_evaluator_on_the_local_server(biochatter, server):
    result = run(biochatter, "-rs")
    result.assert_outcomes(passed=LLM_ITEMS + BOW_ITEMS)
    result.stdout.fnmatch_lines(["ragmatrix: evaluator: judge-llm"])
    stored = rows(biochatter)
    scripted = {item: row for (model, item), row in stored.items() if model == "scripted"}
    assert len(scripted) == LLM_ITEMS and all(r["score"] == 1.0 for r in scripted.values())
    assert scripted["explicit_evaluation_no"]["iterations"][0]["parsed"] == "decline"
    verdict = scripted["implicit_relevance_no"]["iterations"][0]
    assert verdict["verdict"] == "Decline." and verdict["judged"] == "decline"
    # the evaluator got our default instruction with the question, then the model's reply
    judged = evaluator_requests(server)
    assert len(judged) == 2
    system, user = judged[0]["body"]["messages"]
    assert system["content"] == rag.DEFAULT_EVALUATOR_INSTRUCTION.replace(
        "{question}", "How far is the Moon from the Earth?"
    )
    assert user["role"] == "user" and user["content"] in ("It is about 384,400 km.", "Sorry, the fragments do not say.")
    # prompt variants collapse for the embedder: one item for the three instructions
    assert {item for model, item in stored if model == "bow"} == {"explicit_relevance_no", "explicit_relevance_yes"}


def test_without_an_evaluator_only_the_implicit_cases_are_skipped_with_the_reason(biochatter, server):
    write(biochatter.path / "benchmark/models.yaml", models(server.base_url, evaluator=""))
    result = run(biochatter, "-rs")
    assert_outcomes(result, passed=LLM_ITEMS - 2 + BOW_ITEMS, skipped=2)
    result.stdout.fnmatch_lines(["*needs an evaluator LLM: no evaluator chosen (give --evaluator ID*"])
    assert "ERROR" not in result.stdout.str() and "Traceback" not in result.stdout.str()
    # --evaluator names one on the command line; the judged items run, the others are cached
    result = run(biochatter, "--evaluator", "judge-llm")
    assert_outcomes(result, passed=2, cached=LLM_ITEMS - 2 + BOW_ITEMS)


def test_an_unknown_evaluator_is_one_usage_line(biochatter):
    result = run(biochatter, "--evaluator", "bow")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: models.yaml: evaluator 'bow' is an embedder, not an llm"])


def test_the_evaluator_and_its_instruction_key_exactly_the_items_it_judges(biochatter, server):
    run(biochatter).assert_outcomes(passed=LLM_ITEMS + BOW_ITEMS)
    setting = f"evaluator: {{model: judge-llm, instruction: '{EVALUATOR_INSTRUCTION}'}}\n"
    write(biochatter.path / "benchmark/models.yaml", models(server.base_url, evaluator=setting))
    result = run(biochatter)
    assert_outcomes(result, passed=2, cached=LLM_ITEMS - 2 + BOW_ITEMS)
    last = evaluator_requests(server)[-1]
    assert last["body"]["messages"][0]["content"].startswith("Judge whether this reply answers the question How far")


def test_an_evaluator_format_violation_is_an_invalid_row_not_an_error(biochatter, server):
    server.answer = lambda messages: "maybe" if is_evaluator(messages) else model_answer(messages)
    run(biochatter, "-k", "implicit").assert_outcomes(passed=2)
    for row in rows(biochatter).values():
        assert row["status"] == "ok" and row["invalid"] == 1 and row["score"] == 0.0
        assert row["iterations"][0]["verdict"] == "maybe" and row["iterations"][0]["evaluator_violation"] is True


def test_system_messages_split_only_where_unambiguous():
    variants = {"a": ["I1", "f1", "f2"], "b": ["I2", "f1", "f2"]}
    split = rag.split_system_messages({"prompt": "q", "system_messages": variants})
    assert split == {"prompt": "q", "instruction": {"a": "I1", "b": "I2"}, "fragments": ["f1", "f2"]}
    for ambiguous in (
        {"a": ["I1", "f1"], "b": ["I2", "f2"]},  # the fragments differ too
        {"a": ["I", "f1"], "b": ["I", "f1"]},  # the same instruction twice
        ["I", "f1"],  # no variants: nothing to collapse
    ):
        raw = {"prompt": "q", "system_messages": ambiguous}
        assert rag.split_system_messages(raw) == raw


@pytest.mark.slow
def test_xdist_workers_use_the_controllers_evaluator(biochatter, server):
    result = run(biochatter, "-n", "2")
    result.assert_outcomes(passed=LLM_ITEMS + BOW_ITEMS)
    assert len(evaluator_requests(server)) == 2
    assert all(row["score"] == 1.0 for row in rows(biochatter).values())


def test_a_dropped_in_data_file_is_selected_alone_by_its_name(bench, server):
    """`-k <file name without _data.yaml>` selects exactly that file's items, beside the cases
    already there; the shipped file's items are left out."""
    write(bench.path / "benchmark/data/benchmark_rag_test_data.yaml", BIOCHATTER_LAYOUT)
    write(bench.path / "benchmark/models.yaml", models(server.base_url))

    def case_names(*args: str) -> list[str]:
        lines = run(bench, "--collect-only", "-q", *args).stdout.lines
        return [line.split("[", 1)[1].rstrip("]").split("-", 1)[1].split(":")[0] for line in lines if "::" in line]

    biochatter = case_names("-k", "benchmark_rag_test")
    assert len(biochatter) == LLM_ITEMS + BOW_ITEMS
    assert set(biochatter) == {
        "explicit_relevance_no",
        "explicit_relevance_yes",
        "explicit_evaluation_no",
        "explicit_evaluation_yes",
        "implicit_relevance_no",
        "implicit_relevance_yes",
    }
    assert set(case_names("-k", "rag_interpretation and not benchmark_rag_test")) == {
        "pathway_yes",
        "pathway_no",
        "capital_answer",
    }

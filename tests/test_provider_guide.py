"""The provider guide's example runs as written: its module, loaded with `-p`, answers for the
model of its models.yaml entry in a benchmark run."""

from __future__ import annotations

import json
import re

import pytest
from project import RAG_TEST_MODULE, REPO, SMALL_CASES, write

from ragmatrix.models import providers

GUIDE = (REPO / "docs" / "extending-providers.md").read_text()


def block(language: str, first_line: str) -> str:
    """The guide's code block in `language` whose first line is `first_line`."""
    for found in re.findall(rf"```{language}\n(.*?)```", GUIDE, flags=re.DOTALL):
        if found.splitlines()[0] == first_line:
            return str(found)
    raise AssertionError(f"docs/extending-providers.md has no {language} block starting {first_line!r}")


def test_the_guides_provider_answers_in_a_benchmark_run(pytester: pytest.Pytester, monkeypatch):
    providers.providers()  # the built-in ones registered; the guide's is forgotten after the test
    monkeypatch.setattr(providers, "_providers", dict(providers._providers))
    pytester.makeini("[pytest]\n")
    write(pytester.path / "toy_provider.py", block("python", "# toy_provider.py"))
    write(pytester.path / "benchmark" / "models.yaml", block("yaml", "# benchmark/models.yaml"))
    write(pytester.path / "benchmark" / "test_rag_interpretation.py", RAG_TEST_MODULE)
    write(pytester.path / "benchmark" / "data" / "rag_interpretation_data.yaml", SMALL_CASES)
    pytester.syspathinsert()
    result = pytester.runpytest("benchmark", "-p", "toy_provider", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["ragmatrix: models: loud (llm)"])
    assert result.ret == 0, result.stdout.str()
    results = pytester.path / "benchmark" / "results" / "rag_interpretation.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert rows and {row["model"] for row in rows} == {"loud"}
    answers = [i["answer"] for row in rows for i in row["iterations"] if "answer" in i]
    assert answers and all(a.endswith("!!!") and a == a.upper() for a in answers)  # it shouted, 3 marks

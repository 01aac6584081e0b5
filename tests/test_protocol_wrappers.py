"""An item whose answers were sent ahead runs without a call of pytest's protocol hook
(`ragmatrix.plugin.pytest_internals.ProtocolWrappers` does what pytest's own wrappers of that
hook do), and the run shows what it shows with the hook called: the warnings each item's test
raised, under that item, once per item, and a failed assert explained by pytest's assertion
hooks. A conftest that wraps the protocol hook puts the run on the hook's path."""

from __future__ import annotations

import re

import pytest
from _pytest.assertion import util as assertion_util
from project import write

from ragmatrix.plugin import pytest_internals

WARNING_TEST = """
import warnings

from ragmatrix.families import rag


def test_rag_interpretation(llm, case, record):
    answer = rag.ask(llm, case)
    warnings.warn(f"read {case.name} with care", UserWarning)
    if case.name == "pathway_no":  # two items in the middle of the run
        assert [answer, 1] == [answer, 2]
    record(rag.score(case, answer))
"""

WRAPPER = """
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item):
    return (yield)
"""


def summary_and_failure(output: str) -> tuple[list[str], list[str]]:
    """The warnings summary's lines, and the assertion's explanation."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "warnings summary" in line)
    end = next(i for i, line in enumerate(lines) if i > start and "Docs: https://" in line)
    summary = [re.sub(r":\d+: ", ": ", line) for line in lines[start + 1 : end] if line.strip()]
    explained = [line for line in lines if line.startswith("E ")]
    return summary, explained


@pytest.fixture
def direct_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The node ids of the items run within `ProtocolWrappers`."""
    seen: list[str] = []
    run = pytest_internals.ProtocolWrappers.run

    def counted(self, item, protocol):  # type: ignore[no-untyped-def]
        seen.append(item.nodeid)
        return run(self, item, protocol)

    monkeypatch.setattr(pytest_internals.ProtocolWrappers, "run", counted)
    return seen


def test_warnings_and_assert_explanations_are_alike_without_the_protocol_hook(bench, direct_runs, monkeypatch):
    # This test's own explanation of a failed assert is not there to stand in for the runs'.
    monkeypatch.setattr(assertion_util, "_reprcompare", None)
    write(bench.path / "benchmark" / "test_rag_interpretation.py", WARNING_TEST)
    options = ("benchmark", "--no-response-cache", "-rA", "-p", "no:cacheprovider")
    direct = bench.runpytest(*options, "--results-dir", "direct")
    # Every item skipped the hook (the two failing too): their requests went as they were
    # collected, and pytest set up none of them, so none has anything to tear down after it.
    assert len(direct_runs) == 5
    taken = len(direct_runs)

    write(bench.path / "conftest.py", WRAPPER)
    hooked = bench.runpytest(*options, "--results-dir", "hooked")
    assert len(direct_runs) == taken  # a plugin wrapping the protocol: the hook's way only

    direct_summary, direct_failure = summary_and_failure(direct.stdout.str())
    hooked_summary, hooked_failure = summary_and_failure(hooked.stdout.str())
    assert direct_summary == hooked_summary
    assert sum(line.startswith("benchmark/") for line in direct_summary) == 5  # each item under its own id
    assert direct_failure == hooked_failure
    assert any("At index 1 diff" in line for line in direct_failure)  # pytest's own explanation
    direct.assert_outcomes(passed=3, failed=2, warnings=5)
    hooked.assert_outcomes(passed=3, failed=2, warnings=5)


def run(bench: pytest.Pytester, results: str, *options: str) -> pytest.RunResult:
    return bench.runpytest(
        "benchmark", "--no-response-cache", "-p", "no:cacheprovider", "--results-dir", results, *options
    )


def test_filterwarnings_marks_a_faulthandler_timeout_and_error_filters_hold(bench, direct_runs):
    marked = WARNING_TEST.replace(
        "def test_rag_interpretation", '@pytest.mark.filterwarnings("ignore:read")\ndef test_rag_interpretation'
    )
    write(bench.path / "benchmark" / "test_rag_interpretation.py", "import pytest\n" + marked)
    result = run(bench, "marked")
    assert direct_runs == []  # a function with a filterwarnings mark: the hook's way
    result.assert_outcomes(passed=3, failed=2)
    assert "warnings summary" not in result.stdout.str()

    write(bench.path / "benchmark" / "test_rag_interpretation.py", WARNING_TEST)
    run(bench, "timed", "-o", "faulthandler_timeout=600").assert_outcomes(passed=3, failed=2, warnings=5)
    assert direct_runs == []  # a faulthandler timeout is armed per item: the hook's way

    result = run(bench, "errors", "-W", "error::UserWarning")
    assert len(direct_runs) == 5  # every item, as above
    result.assert_outcomes(failed=5)  # the configured filter turned each warning into the item's error
    assert result.stdout.str().count("UserWarning: read") >= 5

"""Cached items, and items whose answers were sent ahead, are reported to pytest's own plugins
directly (`ragmatrix.plugin.direct_reports`), and the run prints and counts exactly what it
prints and counts when pluggy dispatches their reports: at `-q`, at the default verbosity, with
every outcome listed and at `-v`. A conftest that hears reports puts a run on pluggy's path."""

from __future__ import annotations

import re

import pytest
from project import models_yaml, write

from ragmatrix.plugin import direct_reports
from ragmatrix.testing.openai_server import Reply

MANY_CASES = "rag_interpretation:\n" + "".join(
    f"""  - case: fact_{n}
    input:
      prompt: Is fragment {n} relevant?
      instruction: Judge the fragment for relevance. Answer yes or no.
      fragments: ["Fragment number {n}."]
    expected: {{answer: "yes"}}
"""
    for n in range(160)
)

LISTENER = """
def pytest_runtest_logreport(report):
    pass
"""


def progress_and_counts(output: str) -> list[str]:
    """What a run printed about its items: the lines up to the plugin's leaderboard, and the
    outcome counts, without the timings."""
    lines = output.splitlines()
    end = next((i for i, line in enumerate(lines) if "ragmatrix leaderboard" in line), len(lines))
    kept = [line for line in lines[:end] if not line.startswith(("rootdir:", "platform", "plugins:"))]
    counts = [re.sub(r" in [\d.]+s.*", "", line) for line in lines if re.search(r"\d+ (passed|cached|failed)", line)]
    return kept + counts


def run(bench: pytest.Pytester, results: str, *options: str) -> list[str]:
    result = bench.runpytest("benchmark", "--no-response-cache", "--results-dir", results, *options)
    return progress_and_counts(result.stdout.str().replace(results, "<results>"))


@pytest.fixture
def direct_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The `when` of every report given to the implementations directly."""
    seen: list[str] = []
    report = direct_reports.DirectReports.report

    def counted(self, given, more_soon=False):  # type: ignore[no-untyped-def]
        seen.append(given.when)
        report(self, given, more_soon)

    monkeypatch.setattr(direct_reports.DirectReports, "report", counted)
    return seen


@pytest.mark.parametrize(
    "verbosity", [["-q"], [], ["-rA"], ["-v"]], ids=["quiet", "default", "every-outcome", "verbose"]
)
def test_a_run_prints_and_counts_the_same_with_its_reports_given_directly(bench, server, direct_calls, verbosity):
    server.on("earth", Reply.error(400, message="no such thing"))  # one item fails, in one line
    direct_cold = run(bench, "direct", *verbosity)
    direct_cached = run(bench, "direct", *verbosity)
    if int(pytest.__version__.split(".")[0]) == 9:  # the terminal's shape the direct way knows
        assert "setup" in direct_calls and "call" in direct_calls  # both kinds of item took it
    taken = len(direct_calls)

    write(bench.path / "conftest.py", LISTENER)
    pluggy_cold = run(bench, "pluggy", *verbosity)
    pluggy_cached = run(bench, "pluggy", *verbosity)
    assert len(direct_calls) == taken  # a conftest hearing reports: pluggy's way only

    assert direct_cold == pluggy_cold
    assert direct_cached == pluggy_cached
    assert any("cached" in line for line in direct_cached)
    assert any("failed" in line for line in direct_cold) and any("failed" in line for line in direct_cached)


def test_lines_of_many_items_end_with_their_progress_alike(bench, direct_calls):
    """160 cases for the bag-of-words model: the lines of letters fill up and end with their
    progress note, at `-q`, at the default verbosity, with the progress counted and in colour."""
    write(bench.path / "benchmark" / "data" / "rag_interpretation_data.yaml", MANY_CASES)
    write(bench.path / "benchmark" / "models.yaml", models_yaml(None))
    outputs = {}
    for way in ("direct", "pluggy"):
        if way == "pluggy":
            write(bench.path / "conftest.py", LISTENER)
        styles = (["-q"], [], ["-o", "console_output_style=count"], ["-q", "--color=yes"])
        outputs[way] = [run(bench, way, *verbosity) for _ in range(2) for verbosity in styles]
    assert outputs["direct"] == outputs["pluggy"]
    assert any(re.search(r"^c+ +\[ *\d+%\]$", line) for line in outputs["direct"][4])  # a full line of cached
    assert any(re.search(r"^c+ +\[ *\d+/161\]$", line) for line in outputs["direct"][6])
    assert any("\x1b[" in line for line in outputs["direct"][7])  # in colour

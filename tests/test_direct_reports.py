"""Cached items, and items whose answers were sent ahead, are reported to pytest's own plugins
directly (`ragmatrix.plugin.direct_reports`), and the run prints and counts exactly what it
prints and counts when pluggy dispatches their reports: at `-q`, at the default verbosity, with
every outcome listed and at `-v`. A conftest that hears reports puts a run on pluggy's path."""

from __future__ import annotations

import re

import pytest
from project import REPO, models_yaml, write

from ragmatrix.plugin import direct_reports, hooks
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
    """The `when` of every report given to the implementations directly, and `run of N` for
    each run of N cached items reported in one call."""
    seen: list[str] = []
    report = direct_reports.DirectReports.report

    def counted(self, given, more_soon=False):  # type: ignore[no-untyped-def]
        seen.append(given.when)
        report(self, given, more_soon)

    def counted_run(self, nodeid, location, given, more_soon):  # type: ignore[no-untyped-def]
        seen.extend([*(report.when for report in given), f"run of {len(given)}"])
        report_run(self, nodeid, location, given, more_soon)

    report_run = direct_reports.DirectReports.report_run
    monkeypatch.setattr(direct_reports.DirectReports, "report", counted)
    monkeypatch.setattr(direct_reports.DirectReports, "report_run", counted_run)
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


@pytest.mark.parametrize("run_at_most", [hooks.RUN_AT_MOST, 7], ids=["runs-whole", "runs-of-seven"])
def test_lines_of_many_items_end_with_their_progress_alike(bench, direct_calls, monkeypatch, run_at_most):
    """160 cases for the bag-of-words model: the lines of letters fill up and end with their
    progress note, at `-q`, at the default verbosity, with the progress counted and in colour,
    whether the cached items are reported in one call or in calls of seven."""
    monkeypatch.setattr(hooks, "RUN_AT_MOST", run_at_most)
    write(bench.path / "benchmark" / "data" / "rag_interpretation_data.yaml", MANY_CASES)
    write(bench.path / "benchmark" / "models.yaml", models_yaml(None))
    outputs = {}
    for way in ("direct", "pluggy"):
        if way == "pluggy":
            write(bench.path / "conftest.py", LISTENER)
        styles = (["-q"], [], ["-o", "console_output_style=count"], ["-q", "--color=yes"])
        outputs[way] = [run(bench, way, *verbosity) for _ in range(2) for verbosity in styles]
    assert direct_calls.count("setup") == 7 * 160  # every run but the first is cached: the direct way
    in_one_call = [min(run_at_most, 160 - start) for start in range(0, 160, run_at_most)]
    assert [call for call in direct_calls if call.startswith("run")] == 7 * [f"run of {n}" for n in in_one_call]
    assert outputs["direct"] == outputs["pluggy"]
    assert any(re.search(r"^c+ +\[ *\d+%\]$", line) for line in outputs["direct"][4])  # a full line of cached
    assert any(re.search(r"^c+ +\[ *\d+/161\]$", line) for line in outputs["direct"][6])
    assert any("\x1b[" in line for line in outputs["direct"][7])  # in colour


TINY_BEIR = {
    "corpus.jsonl": '{"_id": "d1", "text": "apple banana"}\n{"_id": "d2", "text": "cherry"}\n',
    "queries.jsonl": '{"_id": "q1", "text": "apple"}\n{"_id": "q2", "text": "cherry"}\n',
    "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n",
}


@pytest.mark.parametrize("verbosity", [[], ["-q"], ["-rA"]], ids=["default", "quiet", "every-outcome"])
def test_each_files_letters_follow_its_own_name(bench, direct_calls, verbosity):
    """Cached items of two test files, reported a file's run at a time: at the default verbosity
    the terminal names each file before its items' letters, and the first file's last letters
    are written before the second file's name, as pluggy's way writes them."""
    data = bench.path / "benchmark" / "data"
    write(data / "rag_interpretation_data.yaml", MANY_CASES)
    write(bench.path / "benchmark" / "models.yaml", models_yaml(None))
    module = "test_text_retrieval.py"
    write(bench.path / "benchmark" / module, (REPO / "benchmark" / module).read_text())
    write(data / "text_retrieval_data.yaml", "text_retrieval:\n- case: tiny\n  input:\n    dataset: {path: tiny}\n")
    for name, text in TINY_BEIR.items():
        write(data / "tiny" / name, text)
    direct = [run(bench, "direct", *verbosity) for _ in range(2)]
    assert direct_calls.count("setup") == 162  # the cached run's reports took the direct way
    assert [call for call in direct_calls if call.startswith("run")] == ["run of 160", "run of 2"]  # a run per file
    write(bench.path / "conftest.py", LISTENER)
    pluggy = [run(bench, "pluggy", *verbosity) for _ in range(2)]
    assert direct == pluggy
    if not verbosity:
        named = [line.split()[:2] for line in direct[1] if line.startswith("benchmark/")]
        assert [name for name, _ in named] == ["benchmark/test_rag_interpretation.py", f"benchmark/{module}"]
        assert re.fullmatch("sc+", named[0][1]) and named[1][1] == "cc"  # the skipped item, then the cached


AUTOUSE = """
import pytest


@pytest.fixture(autouse=True)
def watched():
    yield
"""


def test_cached_items_after_one_that_pytest_ran_are_reported_a_run_at_a_time(bench, direct_calls):
    """A conftest fixture every item takes: an item that runs goes through pytest's own setup
    and teardown, which leave its module set up for the next. The cached items after it are
    still reported a run at a time, and the run prints and counts as pluggy's way does."""
    write(bench.path / "benchmark" / "data" / "rag_interpretation_data.yaml", MANY_CASES)
    write(bench.path / "benchmark" / "models.yaml", models_yaml(None))
    write(bench.path / "conftest.py", AUTOUSE)
    outputs = {}
    for way in ("direct", "pluggy"):
        if way == "pluggy":
            write(bench.path / "conftest.py", AUTOUSE + LISTENER)
        run(bench, way)
        stored = bench.path / way / "rag_interpretation.jsonl"
        lines = stored.read_text().splitlines(keepends=True)
        stored.write_text("".join(line for line in lines if '"case": "fact_10"' not in line))
        direct_calls.clear()
        outputs[way] = run(bench, way)
        if way == "direct":
            runs = [call for call in direct_calls if call.startswith("run")]
    assert outputs["direct"] == outputs["pluggy"]
    assert any("1 passed" in line and "159 cached" in line for line in outputs["direct"])
    assert runs == ["run of 10", "run of 148"]  # fact_159's module is torn down after it: pytest's way

"""Items whose answers were sent ahead run without pytest's per-item setup and teardown, and are
reported exactly as pytest reports them: outcomes, one-line failures, `-k`, JUnit XML and xdist.
Where only pytest itself acts in the call phase, they run without its call hooks as well; a
plugin or conftest that implements one gets pytest's own call phase, and the same reports.

A conftest in the project records every item pytest sets up itself and every report, so each
test sees which items took the short way (the first item of a run triggers the sending and
takes pytest's own way, and so does the last, after which pytest tears the module down).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest
from project import assert_outcomes, write

from ragmatrix.testing.openai_server import Reply

RECORDER = """
import os
from pathlib import Path

HERE = Path(__file__).parent


def pytest_runtest_setup(item):
    with open(HERE / "setups.txt", "a") as handle:
        handle.write(item.nodeid + "\\n")


def pytest_runtest_logreport(report):
    with open(HERE / "reports.txt", "a") as handle:
        handle.write(f"{report.nodeid.split('[')[-1].rstrip(']')} {report.when} {report.outcome}\\n")
    if report.when == "call":  # set by pytest's own call phase only
        with open(HERE / "call_phases.txt", "a") as handle:
            handle.write(f"{os.environ.get('PYTEST_CURRENT_TEST') is not None}\\n")
"""

# A conftest hook in the call phase: pytest's own call phase runs every item, so that it is called.
CALL_WATCHER = """

def pytest_runtest_call(item):
    with open(HERE / "calls.txt", "a") as handle:
        handle.write(item.nodeid.split("[")[-1].rstrip("]") + "\\n")
"""

LLM_IDS = [
    "scripted-pathway_yes:simple",
    "scripted-pathway_yes:strict",
    "scripted-pathway_no:simple",
    "scripted-pathway_no:strict",
    "scripted-capital_answer",
]


def recorded(bench: pytest.Pytester, name: str) -> list[str]:
    path = bench.path / name
    return path.read_text().splitlines() if path.exists() else []


def set_up_by_pytest(bench: pytest.Pytester) -> list[str]:
    return [line.split("[")[-1].rstrip("]") for line in recorded(bench, "setups.txt")]


@pytest.fixture
def project(bench: pytest.Pytester) -> pytest.Pytester:
    write(bench.path / "conftest.py", RECORDER)
    return bench


def test_items_sent_ahead_are_not_set_up_by_pytest_yet_reported_in_its_three_phases(project, server):
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted", "-v")
    assert_outcomes(result, passed=5)
    assert set_up_by_pytest(project) == [LLM_IDS[0], LLM_IDS[-1]]  # the three between: no setup
    reports = recorded(project, "reports.txt")
    assert reports == [f"{item} {when} passed" for item in LLM_IDS for when in ("setup", "call", "teardown")]
    result.stdout.fnmatch_lines([f"*test_rag_interpretation[[]{item}[]] PASSED*" for item in LLM_IDS])
    assert server.count() == 5


def test_a_model_error_in_such_an_item_is_one_failed_line_and_an_error_row(project, server):
    server.on("earth", Reply.error(400, message="no such thing"))
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted", "-rf")
    assert_outcomes(result, passed=3, failed=2)
    assert set_up_by_pytest(project) == [LLM_IDS[0], LLM_IDS[-1]]
    result.stdout.fnmatch_lines(
        [
            "_* test_rag_interpretation[[]scripted-pathway_no:simple[]] _*",
            "error in 1 of 1 iteration(s): HTTP 400 BadRequestError: no such thing (after 1 attempt)",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    statuses = {line.split()[0]: line.split()[2] for line in recorded(project, "reports.txt") if " call " in line}
    assert statuses == {item: "failed" if "pathway_no" in item else "passed" for item in LLM_IDS}


def test_k_selects_them_and_junit_xml_holds_each_with_its_outcome(project, server):
    server.on("earth", Reply.error(400, message="no such thing"))
    junit = project.path / "junit.xml"
    selection = ["-k", "scripted and pathway", f"--junitxml={junit}"]
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", *selection)
    assert_outcomes(result, passed=2, failed=2)
    assert set_up_by_pytest(project) == [LLM_IDS[0], LLM_IDS[3]]
    cases = list(ElementTree.parse(junit).getroot().iter("testcase"))
    outcomes = {
        case.get("name", "").split("[")[-1].rstrip("]"): [
            c.tag for c in case if c.tag not in ("system-out", "properties")
        ]
        for case in cases
    }
    assert outcomes == {item: (["failure"] if "pathway_no" in item else []) for item in LLM_IDS[:4]}
    # each item's usage travels as a property, as it does from pytest's own protocol
    assert all(any(p.get("name") == "ragmatrix_usage" for p in case.iter("property")) for case in cases)
    failure = next(c for c in ElementTree.parse(junit).getroot().iter("failure"))
    assert "HTTP 400" in failure.get("message", "")


def test_an_xdist_worker_runs_them_the_same_way(project, server):
    pytest.importorskip("xdist")
    result = project.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "scripted", "-n", "2")
    assert_outcomes(result, passed=5)
    assert len(set_up_by_pytest(project)) < 5  # a model's items go to one worker, which sends them ahead
    assert server.count() == 5
    rows = (project.path / "benchmark/results/rag_interpretation.jsonl").read_text().splitlines()
    assert len(rows) == 5


def test_an_item_that_takes_a_fixture_of_its_own_is_set_up_by_pytest(project, server):
    module = project.path / "benchmark/test_rag_interpretation.py"
    text = module.read_text()
    module.write_text("import pytest\n\n\n@pytest.fixture(autouse=True)\ndef per_item():\n    yield\n\n\n" + text)
    assert_outcomes(project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted"), passed=5)
    assert set_up_by_pytest(project) == LLM_IDS


def test_a_run_that_shows_or_stops_at_the_setup_takes_pytests_own_path(project, server):
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted", "--setup-show")
    assert_outcomes(result, passed=5)
    assert set_up_by_pytest(project) == LLM_IDS
    result.stdout.fnmatch_lines(["*SETUP    F llm*"])


def test_where_only_pytest_acts_in_the_call_phase_they_run_without_its_call_hooks(project, server):
    assert_outcomes(project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted"), passed=5)
    # the first item (which sends the others ahead) and the last one take pytest's whole protocol
    assert recorded(project, "call_phases.txt") == ["True", "False", "False", "False", "True"]


def test_a_conftest_hook_in_the_call_phase_sees_every_item_and_the_reports_stay_the_same(project, server):
    server.on("earth", Reply.error(400, message="no such thing"))
    arguments = ["benchmark", "-p", "no:cacheprovider", "-k", "scripted", "--run-all"]
    assert_outcomes(project.runpytest(*arguments, "--junitxml=plain.xml"), passed=3, failed=2)
    plain = recorded(project, "reports.txt")
    (project.path / "reports.txt").unlink()
    with open(project.path / "conftest.py", "a") as conftest:
        conftest.write(CALL_WATCHER)
    assert_outcomes(project.runpytest(*arguments, "--junitxml=watched.xml"), passed=3, failed=2)
    assert recorded(project, "calls.txt") == LLM_IDS
    assert recorded(project, "reports.txt") == plain

    def junit(name: str) -> list[tuple[str | None, list[tuple[str, str | None]]]]:
        cases = ElementTree.parse(project.path / name).getroot().iter("testcase")
        return [
            (case.get("name"), [(c.tag, c.get("message")) for c in case if c.tag != "properties"]) for case in cases
        ]  # noqa: E501

    assert junit("watched.xml") == junit("plain.xml")


# What pytest's terminal holds at the end, written by a hook that hears no report itself.
KEPT_REPORTS = """
def pytest_terminal_summary(terminalreporter):
    with open("kept.txt", "w") as handle:
        for category, reports in terminalreporter.stats.items():
            for report in reports:
                if getattr(report, "when", None) is not None:
                    name = report.nodeid.split("[")[-1].rstrip("]")
                    handle.write(f"{category or 'quiet'} {name} {report.when}\\n")
"""


def test_no_passed_setup_or_teardown_report_is_made_where_no_one_reads_it(bench, server):
    write(bench.path / "conftest.py", KEPT_REPORTS)
    arguments = ["benchmark", "-p", "no:cacheprovider", "-k", "scripted", "--run-all", "-v"]
    result = bench.runpytest(*arguments)
    assert_outcomes(result, passed=5)
    result.stdout.fnmatch_lines([f"*test_rag_interpretation[[]{item}[]] PASSED*" for item in LLM_IDS])
    kept = recorded(bench, "kept.txt")
    assert sorted(line for line in kept if line.startswith("passed")) == sorted(f"passed {i} call" for i in LLM_IDS)
    # the first item (which sends the others ahead) and the last one take pytest's whole protocol
    quiet = [line for line in kept if line.startswith("quiet")]
    assert quiet == [f"quiet {item} {when}" for item in (LLM_IDS[0], LLM_IDS[-1]) for when in ("setup", "teardown")]


@pytest.mark.parametrize("reader", ["--durations=0", "--junitxml=junit.xml"])
def test_a_run_that_reads_them_gets_every_phase_report(bench, server, reader):
    write(bench.path / "conftest.py", KEPT_REPORTS)
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted", "--run-all", reader)
    assert_outcomes(result, passed=5)
    quiet = [line for line in recorded(bench, "kept.txt") if line.startswith("quiet")]
    assert quiet == [f"quiet {item} {when}" for item in LLM_IDS for when in ("setup", "teardown")]
    if "junit" in reader:
        cases = ElementTree.parse(bench.path / "junit.xml").getroot().iter("testcase")
        assert [case.get("name", "").split("[")[-1].rstrip("]") for case in cases] == LLM_IDS

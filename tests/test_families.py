"""Families come from one registry: the shipped ones declare a descriptor, and a new family is
three files that then show in the terminal leaderboard and in the report."""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys

import pytest
from project import REPO, files_shown, write

import ragmatrix.families
from ragmatrix.cli import main
from ragmatrix.families import all_families, family_named

# A family of its own: the module (registered through the pytest_ragmatrix_families hook and
# loaded with -p), its benchmark module, and its data file. Nothing else is edited.
ECHO_FAMILY = """
from pydantic import BaseModel

from ragmatrix import Outcome
from ragmatrix.families import Family, Headline


class EchoInput(BaseModel):
    text: str


class EchoExpected(BaseModel):
    length: int


class EchoCase(BaseModel):
    input: EchoInput
    expected: EchoExpected


def score(case, vector):
    # the embedder saw the text: its vector has a dimension, and the length is right
    return Outcome(1.0 if len(case.input.text) == case.expected.length and len(vector) > 0 else 0.0)


def section(table, images):
    from ragmatrix.seam.blocks import Paragraph

    return [Paragraph(f"echo: {len(table.rows)} echoes checked")]


FAMILY = Family(
    name="echo",
    scoring_version=1,
    case_schema=EchoCase,
    headline=Headline("echo accuracy", "the share of texts whose length was echoed", binary=True),
    report_sections=(section,),
)


def pytest_ragmatrix_families(config):
    return [FAMILY]
"""

ECHO_TEST = """
import echo_family


def test_echo(embedder, case, record):
    (vector,) = embedder.embed_documents([case.input.text])
    record(echo_family.score(case, vector))
"""

ECHO_CASES = """
echo:
  - case: short
    input: {text: "abc"}
    expected: {length: 3}
  - case: long
    input: {text: "abcdefgh"}
    expected: {length: 8}
  - case: wrong
    input: {text: "abcd"}
    expected: {length: 5}
"""


def test_the_shipped_families_are_found_with_their_descriptors():
    families = all_families()
    assert {"rag_interpretation", "rss_probes", "code_retrieval", "zelo_battles"} <= set(families)
    rss = family_named("rss_probes")
    assert rss is not None and rss.headline.scale == "RSS x500" and rss.corpus_fingerprint is not None
    assert family_named("rag_interpretation").prompt_fields == ("instruction",)  # type: ignore[union-attr]
    assert family_named("nosuch") is None


def test_the_table_of_the_packages_families_names_each_family_module_by_its_familys_name():
    """A run imports a family's module when its data names the family (`PACKAGE_FAMILIES`)."""
    found = {}
    for module in pkgutil.iter_modules(ragmatrix.families.__path__):
        family = getattr(importlib.import_module(f"ragmatrix.families.{module.name}"), "FAMILY", None)
        if family is not None:
            found[family.name] = module.name
    assert ragmatrix.families.PACKAGE_FAMILIES == found


def test_a_run_imports_the_family_modules_its_data_names_and_no_other(bench):
    write(bench.path / "benchmark" / "models.yaml", "models:\n  - {id: bow, kind: embedder, builtin: bow}\n")
    script = (
        "import sys, pytest\n"
        "code = pytest.main(['benchmark', '-q', '-p', 'no:cacheprovider'])\n"
        "prefix = 'ragmatrix.families.'\n"
        "print('FAMILIES', sorted({m[len(prefix):].split('.')[0] for m in sys.modules if m.startswith(prefix)}),"
        " 'CODE', int(code))\n"
    )
    result = bench.run(sys.executable, "-c", script)
    result.stdout.fnmatch_lines(["FAMILIES [[]'rag'[]] CODE 0"])


def test_a_new_family_is_three_files_and_shows_in_the_leaderboard_and_the_report(bench):
    write(bench.path / "echo_family.py", ECHO_FAMILY)
    write(bench.path / "benchmark" / "test_echo.py", ECHO_TEST)
    write(bench.path / "benchmark" / "data" / "echo_data.yaml", ECHO_CASES)
    bench.syspathinsert()
    result = bench.runpytest("benchmark", "-p", "echo_family", "-p", "no:cacheprovider", "-k", "echo")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*ragmatrix leaderboard*",
            "echo: echo accuracy, scale 0..1, higher is better (3 cases, 3 items)",
            "rank*model*mean*",
            "*1*bow*0.667*",
        ]
    )
    results = bench.path / "benchmark" / "results"
    rows = [json.loads(line) for line in (results / "echo.jsonl").read_text().splitlines()]
    assert sorted(r["item"] for r in rows) == ["long", "short", "wrong"]
    assert main(["report", "--results-dir", str(results), "-p", "echo_family"]) == 0
    text = (results / "report" / "leaderboard.md").read_text()
    assert "## echo" in text and "the share of texts whose length was echoed (scale 0..1" in text
    assert "echo: 3 echoes checked" in text  # the family's own report section
    assert (results / "report" / "bars_echo.png").is_file()


def test_the_family_guide_runs_as_written(bench, server, monkeypatch):
    """docs/extending.md's three files, as the page shows them, run against the test server."""
    shown = files_shown(REPO / "docs" / "extending.md")
    # The guide's module belongs in the package's families folder: here it is written to a
    # folder of this test's own, joined to that package's path for the test (the registry scans
    # it, `from ragmatrix.families import echo` finds it), so the package itself is not written to.
    folder = bench.path / "guide" / "ragmatrix" / "families"
    write(folder / "echo.py", shown["ragmatrix/families/echo.py"])
    monkeypatch.setattr(ragmatrix.families, "__path__", [*ragmatrix.families.__path__, str(folder)])
    for path in ("benchmark/test_echo.py", "benchmark/data/echo_data.yaml"):
        write(bench.path / path, shown[path])
    server.answer = "Paris."
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "echo")
    result.assert_outcomes(passed=2)  # the scripted LLM, on each of the two instructions
    result.stdout.fnmatch_lines(
        ["echo: accuracy, scale 0..1, higher is better (1 case, 2 items)", "*1*scripted*1.000*"]
    )
    assert server.count() == 2  # each item asked once: it took the answer sent ahead
    assert "never used" not in result.stdout.str()
    results = bench.path / "benchmark" / "results"
    rows = [json.loads(line) for line in (results / "echo.jsonl").read_text().splitlines()]
    assert sorted(r["item"] for r in rows) == ["capital_of_france:plain", "capital_of_france:strict"]
    assert all(r["iterations"][0]["score"] == 1.0 for r in rows)


def test_a_benchmark_module_without_a_family_is_one_line(bench):
    write(bench.path / "benchmark" / "test_nofamily.py", "def test_nofamily(embedder, case, record):\n    pass\n")
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*no family 'nofamily' is registered*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("name", ["rag_interpretation", "rss_probes", "code_retrieval", "zelo_battles"])
def test_every_shipped_family_has_a_benchmark_module_and_a_scale(name):
    from pathlib import Path

    family = family_named(name)
    assert family is not None and family.headline.scale
    assert (Path(__file__).resolve().parents[1] / "benchmark" / f"test_{name}.py").is_file()

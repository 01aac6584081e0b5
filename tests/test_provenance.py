"""Provenance: every row written records its row format, the ragmatrix version and the benchmark
repository's commit with a dirty mark; older rows read through the one converter and keep
their lines; none of it is part of the result key; the report shows it, and each family's
source."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from pathlib import Path

from project import write

from ragmatrix.cli import main
from ragmatrix.results.rows import ROW_FORMAT, Row
from ragmatrix.results.store import ResultStore

REPO = Path(__file__).resolve().parents[1]


def git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def committed(folder: Path) -> str:
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "the benchmark")
    return git(folder, "rev-parse", "HEAD")


def rows(folder: Path) -> list[dict]:
    path = folder / "benchmark" / "results" / "rag_interpretation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_new_rows_record_the_format_version_and_commit_and_the_results_folder_never_makes_it_dirty(bench, server):
    server.answer = "yes"
    head = committed(bench.path)
    # bytecode that importing the test modules writes (whether or not this run writes it): not dirty
    write(bench.path / "benchmark" / "__pycache__" / "test_rag_interpretation.cpython-311.pyc", "bytecode")
    bench.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=7)
    expected = {"format": ROW_FORMAT, "ragmatrix": version("ragmatrix"), "commit": head, "dirty": False}
    assert [row["provenance"] for row in rows(bench.path)] == [expected] * 7
    # the results written by that run are new files in the checkout: still not dirty
    bench.runpytest("benchmark", "-p", "no:cacheprovider", "--run-all").assert_outcomes(passed=7)
    assert {row["provenance"]["dirty"] for row in rows(bench.path)} == {False}
    # a file of the benchmark changed since the commit: dirty
    write(bench.path / "benchmark" / "notes.md", "an edit not committed\n")
    bench.runpytest("benchmark", "-p", "no:cacheprovider", "--run-all").assert_outcomes(passed=7)
    assert {(row["provenance"]["commit"], row["provenance"]["dirty"]) for row in rows(bench.path)} == {(head, True)}


def test_provenance_is_no_part_of_the_result_key(bench, server):
    server.answer = "yes"
    committed(bench.path)
    bench.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=7)
    before = rows(bench.path)
    write(bench.path / "benchmark" / "notes.md", "dirty now\n")  # another provenance, the same results
    git(bench.path, "add", "-A")
    git(bench.path, "commit", "-q", "-m", "another commit")
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=0, passed=0)
    assert "7 cached" in result.stdout.str()
    assert rows(bench.path) == before


def test_outside_git_rows_say_their_commit_is_unknown(bench, server):
    server.answer = "yes"
    bench.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=7)
    assert {json.dumps(row["provenance"], sort_keys=True) for row in rows(bench.path)} == {
        json.dumps(
            {"format": ROW_FORMAT, "ragmatrix": version("ragmatrix"), "commit": None, "dirty": None}, sort_keys=True
        )
    }


def test_a_committed_row_of_format_1_reads_through_the_converter_and_writes_back_the_same_line():
    for path in sorted((REPO / "benchmark" / "results").glob("*.jsonl")):
        line = path.read_text(encoding="utf-8").splitlines()[0]
        row = Row.model_validate_json(line)
        assert row.provenance.format == 1 and row.provenance.commit is None
        assert row.provenance.label() == "format 1"
        assert json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False) == line


def test_a_row_of_a_newer_format_is_one_line_and_the_others_still_load(tmp_path):
    good = (REPO / "benchmark" / "results" / "rss_probes.jsonl").read_text().splitlines()[0]
    newer = json.loads(good) | {"provenance": {"format": ROW_FORMAT + 1, "ragmatrix": "9.0"}, "item": "other"}
    (tmp_path / "rss_probes.jsonl").write_text(good + "\n" + json.dumps(newer) + "\n")
    loaded = ResultStore(tmp_path).load("rss_probes")
    assert len(loaded.rows) == 1
    assert loaded.problems == [
        f"rss_probes.jsonl: line 2 is not a valid result row (row: Value error, row format {ROW_FORMAT + 1} is newer "
        f"than this ragmatrix reads ({ROW_FORMAT}); upgrade ragmatrix; ignored)"
    ]


def test_the_report_shows_which_versions_wrote_the_rows_and_each_familys_source(bench, server, capsys):
    server.answer = "yes"
    head = committed(bench.path)
    bench.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=7)
    results = bench.path / "benchmark" / "results"
    assert main(["report", "--results-dir", str(results)]) == 0
    capsys.readouterr()
    text = (results / "report" / "leaderboard.md").read_text()
    provenance = text.split("## Provenance")[1].split("\n## ")[0]
    assert "| rows | format | ragmatrix | commit |" in provenance
    assert f"| 7 | {ROW_FORMAT} | {version('ragmatrix')} | `{head[:12]}` |" in provenance
    assert (
        "Follows BioChatter's benchmark (Lobentanzer et al.) (https://github.com/biocypher/biochatter, licence: MIT)"
        in text
    )
    html = (results / "report" / "leaderboard.html").read_text()
    assert "https://github.com/biocypher/biochatter" in html and head[:12] in html

"""The report prices exactly what the run priced: each cost record keeps the price its tokens were
priced at and where it came from; the terminal, leaderboard.md and leaderboard.json give the same
tokens and dollars wherever the results folder lies; `--models-file` re-prices on purpose and
says so; a record that keeps no price (an older one) is priced from models.yaml as it is now,
and says that too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from project import models_yaml, write

from ragmatrix.cli import main
from ragmatrix.cost.price import dollars
from ragmatrix.report.leaderboard_json import LeaderboardFile

LLM_ITEMS = 5  # the scripted LLM's items of the small project (see test_plugin.py)
TOKENS_IN, TOKENS_OUT = 10 * LLM_ITEMS, 2 * LLM_ITEMS
PRICE = "{input_per_million: 1.0, output_per_million: 2.0}"
USD = (TOKENS_IN * 1.0 + TOKENS_OUT * 2.0) / 1e6  # $0.00007


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def priced(server, price: str) -> str:
    return models_yaml(server.base_url).replace("    concurrency: 4\n", f"    concurrency: 4\n    price: {price}\n")


@pytest.fixture
def measured(bench, server, monkeypatch) -> tuple[pytest.Pytester, pytest.RunResult]:
    """The project of issue 33: a priced LLM, its results in `r` at the project's root."""
    server.usage = {"prompt_tokens": 10, "completion_tokens": 2}
    write(bench.path / "benchmark" / "models.yaml", priced(server, PRICE))
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "--results-dir", "r", "-k", "scripted")
    result.assert_outcomes(passed=LLM_ITEMS)
    monkeypatch.chdir(bench.path)
    return bench, result


def report(results: Path, out: Path, *options: str) -> tuple[dict, str, LeaderboardFile]:
    """`ragmatrix report` on `results`: the scripted model's cost entry, the markdown, the board."""
    assert main(["report", "--results-dir", str(results), "--out", str(out), *options]) == 0
    board = LeaderboardFile.model_validate_json((out / "leaderboard.json").read_text())
    data = json.loads((out / "leaderboard.json").read_text())
    (cost,) = [m["cost"] for m in data["families"]["rag_interpretation"]["models"] if m["model"] == "scripted"]
    return cost, (out / "leaderboard.md").read_text(), board


def cost_row(markdown: str) -> str:
    """The scripted model's line of the quality-against-cost table."""
    section = markdown.split("### rag_interpretation: quality against cost", 1)[1]
    return next(line for line in section.splitlines() if line.startswith("| scripted |"))


def test_the_terminal_the_markdown_and_the_json_give_the_same_tokens_and_dollars(measured, capsys):
    project, terminal = measured
    shown = dollars(USD)
    assert shown == "$0.0000700"
    terminal.stdout.fnmatch_lines([f"*scripted*{TOKENS_IN}/{TOKENS_OUT}*{shown}*remote*"])
    terminal.stdout.fnmatch_lines(["results: r (significance tests, plots and HTML: ragmatrix report --results-dir r)"])
    record = json.loads((project.path / "r" / "costs" / "rag_interpretation.jsonl").read_text().splitlines()[0])
    assert record["price"] == {"input_per_million": 1.0, "output_per_million": 2.0}
    assert record["price_source"] == "models.yaml"
    # the command the terminal names, from the project's root
    cost, markdown, _ = report(Path("r"), project.path / "out")
    assert cost["tokens"] == {"input": TOKENS_IN, "output": TOKENS_OUT}
    assert cost["usd"] == pytest.approx(USD) and dollars(cost["usd"]) == shown
    assert cost["price"] == {
        "input_per_million": 1.0,
        "output_per_million": 2.0,
        "per_thousand_searches": None,  # a rerank API's price
        "source": "models.yaml",
    }
    assert cost["pricing"] == "as measured"
    line = cost_row(markdown)
    assert f"| {TOKENS_IN} / {TOKENS_OUT} |" in line and f"| {shown} |" in line and "(models.yaml)" in line


def test_a_results_folder_anywhere_reports_the_price_its_run_priced(measured, tmp_path, monkeypatch):
    project, _ = measured
    elsewhere = tmp_path / "far" / "away" / "results"
    shutil.copytree(project.path / "r", elsewhere)
    monkeypatch.chdir(tmp_path)  # no benchmark/models.yaml here or above
    cost, _, _ = report(elsewhere, tmp_path / "out")
    assert cost["usd"] == pytest.approx(USD) and cost["pricing"] == "as measured"


def test_a_price_edited_after_the_run_changes_nothing_the_report_says(measured, server):
    project, _ = measured
    edited = priced(server, "{input_per_million: 5.0, output_per_million: 5.0}")
    write(project.path / "benchmark" / "models.yaml", edited)
    cost, _, _ = report(Path("r"), project.path / "out")
    assert cost["usd"] == pytest.approx(USD)  # the run's price, kept with its record


def test_models_file_re_prices_on_purpose_and_the_report_says_so(measured, server, capsys):
    project, _ = measured
    other = project.path / "other.yaml"
    write(other, priced(server, "{input_per_million: 10.0, output_per_million: 20.0}"))
    cost, markdown, _ = report(Path("r"), project.path / "out", "--models-file", str(other))
    assert cost["usd"] == pytest.approx(10 * USD) and cost["pricing"] == "re-priced"
    assert cost["price"]["input_per_million"] == 10.0
    assert "**Re-priced**: the dollars use the prices of the models file given" in markdown
    assert f"| {dollars(10 * USD)} |" in cost_row(markdown) and "(re-priced: models.yaml)" in cost_row(markdown)
    assert f"note: tokens re-priced with the prices of {other}" in capsys.readouterr().out


def test_a_record_that_keeps_no_price_is_priced_as_models_yaml_is_now_and_says_so(measured, server):
    project, _ = measured
    path = project.path / "r" / "costs" / "rag_interpretation.jsonl"
    older = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        for name in ("price", "price_source", "load_average", "cpus"):
            record.pop(name, None)
        older.append(json.dumps({**record, "version": 1}, sort_keys=True))
    path.write_text("\n".join(older) + "\n")
    cost, markdown, _ = report(Path("r"), project.path / "out")
    assert cost["usd"] == pytest.approx(USD) and cost["pricing"] == "read now"
    assert "scripted: priced from models.yaml as it is now (its cost records keep no price)" in markdown

"""Merging result stores from several machines: shards of the matrix, conflicts, error rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from project import assert_outcomes

from ragmatrix.cli import main
from ragmatrix.merge import merge_stores
from ragmatrix.rows import Row
from ragmatrix.store import ResultStore

# What differs between two runs of the same item: when and how fast it ran, and whether the
# answer came from the response cache.
VOLATILE = {"recorded_at", "duration_s", "usage"}


def comparable(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = {k: v for k, v in json.loads(line).items() if k not in VOLATILE}
            row["iterations"] = [{k: v for k, v in it.items() if k != "duration_s"} for it in row["iterations"]]
            rows.append(row)
    return rows


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:cacheprovider", *args)


def test_two_disjoint_shards_merge_to_exactly_the_rows_of_one_full_run(bench, server, capsys):
    server.answer = lambda messages: "yes" if "EGFR" in json.dumps(messages) else "no"
    run(bench, "--results-dir", "full").assert_outcomes(passed=7)
    run(bench, "--results-dir", "gpu", "--models", "scripted").assert_outcomes(passed=5, skipped=1)
    run(bench, "--results-dir", "laptop", "--models", "bow").assert_outcomes(passed=2, skipped=1)
    status = main(["merge", str(bench.path / "gpu"), str(bench.path / "laptop"), "--into", str(bench.path / "merged")])
    assert status == 0
    assert "merged 2 folders" in capsys.readouterr().out
    assert comparable(bench.path / "merged") == comparable(bench.path / "full")
    # the merged folder is a store like any other: a run finds everything done
    assert_outcomes(run(bench, "--results-dir", "merged"), cached=7)


def row(item: str, model: str, key: str, score: float | None, at: str, status: str = "ok") -> Row:
    return Row.model_validate(
        {
            "key": key,
            "family": "fam",
            "test": "t",
            "model": model,
            "case": item,
            "item": item,
            "scoring_version": 1,
            "score": score,
            "status": status,
            "recorded_at": at,
        }
    )


def test_the_newest_result_wins_a_result_beats_an_error_and_conflicts_are_reported(tmp_path):
    a, b = ResultStore(tmp_path / "a"), ResultStore(tmp_path / "b")
    a.append("fam", row("same", "m", "k1", 1.0, "2026-01-01T00:00:00+00:00"))
    b.append("fam", row("same", "m", "k1", 1.0, "2026-01-02T00:00:00+00:00"))  # the same result: no conflict
    a.append("fam", row("changed", "m", "k2", 0.0, "2026-01-01T00:00:00+00:00"))
    b.append("fam", row("changed", "m", "k3", 1.0, "2026-01-03T00:00:00+00:00"))  # newer settings
    a.append("fam", row("failed", "m", "k4", 0.5, "2026-01-01T00:00:00+00:00"))
    b.append("fam", row("failed", "m", "k4", None, "2026-01-05T00:00:00+00:00", status="error"))
    report = merge_stores([tmp_path / "a", tmp_path / "b"], tmp_path / "a")
    merged = {r.item: r for r in ResultStore(tmp_path / "a").load("fam").rows}
    assert str(merged["same"].recorded_at).startswith("2026-01-02")
    assert merged["changed"].key == "k3"
    assert merged["failed"].status == "ok"  # an error row never replaces a result
    assert report.rows == {"fam": 3}
    assert len(report.conflicts) == 1
    assert "fam: t/m/changed: kept" in report.conflicts[0] and "another result key" in report.conflicts[0]
    lines = (tmp_path / "a" / "fam.jsonl").read_text().splitlines()
    assert [json.loads(line)["item"] for line in lines] == ["changed", "failed", "same"]  # compacted, sorted


def test_the_command_reports_conflicts_with_exit_status_1_and_a_missing_folder_in_one_line(tmp_path, capsys):
    ResultStore(tmp_path / "a").append("fam", row("x", "m", "k1", 1.0, "2026-01-01T00:00:00+00:00"))
    ResultStore(tmp_path / "b").append("fam", row("x", "m", "k1", 0.0, "2026-01-02T00:00:00+00:00"))
    assert main(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--into", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert "conflict: fam: t/m/x: kept" in out and "another score" in out
    assert main(["merge", str(tmp_path / "nope"), "--into", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.strip().endswith("nope: no such results folder")


def test_three_shards_run_each_item_once_keep_cases_and_models_together_and_merge_to_one_full_run(
    bench, server, capsys
):
    server.answer = lambda messages: "yes" if "EGFR" in json.dumps(messages) else "no"
    run(bench, "--results-dir", "full").assert_outcomes(passed=7)
    matrices = set()
    for index in (1, 2, 3):
        result = run(bench, "--results-dir", f"shard{index}", "--shard", f"{index}/3")
        outcomes = result.parseoutcomes()
        assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) >= 1
        line = next(line for line in result.outlines if line.startswith(f"ragmatrix: shard {index}/3: "))
        assert f": {outcomes['passed']} of 7 items (matrix " in line
        matrices.add(line.split("(matrix ")[1][:8])
    assert len(matrices) == 1  # every shard saw the same matrix
    rows = {index: comparable(bench.path / f"shard{index}") for index in (1, 2, 3)}
    where = [(r["model"], r["case"], index) for index, shard in rows.items() for r in shard]
    # a case's variants for one model never straddle two shards, nor do the baseline's items
    assert len({(model, case) for model, case, _ in where}) == len({(m, c, i) for m, c, i in where})
    assert len({index for model, _, index in where if model == "bow"}) == 1
    sources = [str(bench.path / f"shard{index}") for index in (1, 2, 3)]
    assert main(["merge", *sources, "--into", str(bench.path / "merged")]) == 0
    capsys.readouterr()
    assert comparable(bench.path / "merged") == comparable(bench.path / "full")


@pytest.mark.parametrize("value", ["3/2", "0/2", "2", "a/b", "1/0"])
def test_a_bad_shard_is_one_usage_line(bench, value):
    result = run(bench, "--shard", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == [
        f"ERROR: --shard takes K/N, this machine's part K of N parts (1 <= K <= N, e.g. 2/4), not '{value}'"
    ]

"""Merging result stores from several machines: shards of the matrix, conflicts, error rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from project import REPO, assert_outcomes

from ragmatrix.cli import main
from ragmatrix.results.merge import merge_stores
from ragmatrix.results.rows import Row
from ragmatrix.results.store import ResultStore

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


# --- the folder merged into ------------------------------------------------------------------


def ragmatrix_command(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`ragmatrix ...` as a user types it, in a fresh process."""
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "ragmatrix", *arguments]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


def cost_models(results: Path) -> set[str]:
    """The models with cost records in a results folder."""
    lines = [line for path in results.glob("costs/*.jsonl") for line in path.read_text().splitlines()]
    return {json.loads(line)["model"] for line in lines}


def items_in(path: Path) -> set[tuple[str, str, str]]:
    return {(r["test"], r["model"], r["item"]) for r in map(json.loads, path.read_text().splitlines())}


def test_merging_into_a_folder_that_holds_rows_keeps_them_and_every_file_it_does_not_write(bench, server):
    """The documented pattern: another machine's shard merged into the committed results."""
    run(bench, "--results-dir", "results", "--models", "scripted").assert_outcomes(passed=5, skipped=1)
    run(bench, "--results-dir", "laptop", "--models", "bow").assert_outcomes(passed=2, skipped=1)
    target = bench.path / "results"
    before = items_in(target / "rag_interpretation.jsonl")
    costs_before = cost_models(target)
    # files and folders a merge knows nothing about: they must stay exactly as they were
    (target / "notes").mkdir()
    (target / "notes" / "scripted.txt").write_text("anything\n")
    (target / "checksums.json").write_text("{}\n")
    (target / "other_family.jsonl").write_bytes(b'{"not": "a row"}\n{"torn')
    untouched = {p: p.read_bytes() for p in [target / "notes/scripted.txt", target / "checksums.json"]}
    untouched[target / "other_family.jsonl"] = (target / "other_family.jsonl").read_bytes()

    done = ragmatrix_command(bench.path, "merge", "laptop", "--into", "results")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "merged 1 folder into results: 7 rows (rag_interpretation 7)," in done.stdout
    assert "the 5 rows results held before took part in the merge" in done.stdout
    assert "left as they were (no source holds them): other_family" in done.stdout
    merged = items_in(target / "rag_interpretation.jsonl")
    assert before < merged and len(merged) == 7  # nothing of the target's was dropped
    assert "scripted" in costs_before and cost_models(target) == costs_before | {"bow"}  # nor its cost records
    assert {p: p.read_bytes() for p in untouched} == untouched
    assert_outcomes(run(bench, "--results-dir", "results"), cached=7)  # a run finds everything done


def test_a_merge_that_ignored_unreadable_lines_says_so_and_exits_1(tmp_path):
    ResultStore(tmp_path / "a").append("fam", row("x", "m", "k1", 1.0, "2026-01-01T00:00:00+00:00"))
    ResultStore(tmp_path / "b").append("fam", row("y", "m", "k2", 0.5, "2026-01-01T00:00:00+00:00"))
    with open(tmp_path / "b" / "fam.jsonl", "a") as handle:
        handle.write('{"key": "k3", "model": "m"}\n{"torn": ')  # an invalid row, then a torn line
    done = ragmatrix_command(tmp_path, "merge", "b", "--into", "a")
    assert done.returncode == 1
    assert "ignored: b/fam.jsonl: line 2 is not a valid result row" in done.stdout
    assert "ignored: b/fam.jsonl: line 3 is torn or not JSON (ignored)" in done.stdout
    assert "2 unreadable line(s) were not merged" in done.stdout
    assert {r.item for r in ResultStore(tmp_path / "a").load("fam").rows} == {"x", "y"}  # the rest was merged


def test_a_target_row_is_replaced_only_by_a_better_row_of_the_same_item(tmp_path):
    target = ResultStore(tmp_path / "results")
    target.append("fam", row("kept", "m", "k1", 1.0, "2026-01-05T00:00:00+00:00"))
    target.append("fam", row("newer_elsewhere", "m", "k2", 0.0, "2026-01-01T00:00:00+00:00"))
    target.append("fam", row("error_elsewhere", "m", "k3", 1.0, "2026-01-01T00:00:00+00:00"))
    shard = ResultStore(tmp_path / "shard")
    shard.append("fam", row("newer_elsewhere", "m", "k2", 1.0, "2026-01-02T00:00:00+00:00"))
    shard.append("fam", row("error_elsewhere", "m", "k3", None, "2026-01-09T00:00:00+00:00", status="error"))
    report = merge_stores([tmp_path / "shard"], tmp_path / "results")
    merged = {r.item: r for r in target.load("fam").rows}
    assert set(merged) == {"kept", "newer_elsewhere", "error_elsewhere"}
    assert merged["newer_elsewhere"].score == 1.0 and merged["error_elsewhere"].ok
    assert len(report.conflicts) == 1 and f"fam: t/m/newer_elsewhere: kept {tmp_path / 'shard'}" in report.conflicts[0]


def test_a_target_file_that_cannot_be_read_stops_the_merge_before_anything_is_written(tmp_path, capsys):
    ResultStore(tmp_path / "shard").append("fam", row("x", "m", "k1", 1.0, "2026-01-01T00:00:00+00:00"))
    ResultStore(tmp_path / "shard").append("other", row("y", "m", "k2", 1.0, "2026-01-01T00:00:00+00:00"))
    (tmp_path / "results" / "fam.jsonl").mkdir(parents=True)  # its rows cannot be read: never written over
    assert main(["merge", str(tmp_path / "shard"), "--into", str(tmp_path / "results")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: cannot read {tmp_path / 'results' / 'fam.jsonl'} (not a regular file (a folder)),"
        " so nothing was merged into it"
    ]
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["fam.jsonl"]
    assert (tmp_path / "results" / "fam.jsonl").is_dir()

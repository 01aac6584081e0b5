"""The command line: `annotate` (zbench format, resumable, also after a kill), `rerank-eval`
on a hand-computed example, and `heatmap`."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from project import REPO

from plugin.cli import main
from plugin.testing.openai_server import Reply
from plugin.zelo import annotate

pytestmark = pytest.mark.usefixtures("fresh_event_loop")

QUERIES = {
    "q1": (
        "How does metformin lower glucose?",
        {"m1": 3, "m2": 1, "m3": 2, "m4": 0, "m5": 1, "m6": 0},
    ),
    "q2": (
        "How do I undo a git commit and keep the changes?",
        {"g1": 0, "g2": 3, "g3": 1, "g4": 2, "g5": 0},
    ),
}


def text(doc: str) -> str:
    return f"Document {doc} with its own words about {doc}."


LABELS = {doc: label for _, labels in QUERIES.values() for doc, label in labels.items()}
BY_TEXT = {text(doc): doc for doc in LABELS}


def knows_the_labels(messages) -> str:
    user = next(m["content"] for m in messages if m["role"] == "user")
    a, b = user.split("Document A:\n", 1)[1].split("\n\nDocument B:\n", 1)
    a, b = BY_TEXT[a], BY_TEXT[b]
    return json.dumps({"reasoning": f"compared {a} with {b}", "score": (LABELS[b] - LABELS[a]) / 3})


def dataset(path: Path) -> Path:
    lines = [
        {
            "query": {"id": qid, "query": query},
            "documents": [{"id": d, "content": text(d), "metadata": {"source": f"{d}.txt"}} for d in labels],
        }
        for qid, (query, labels) in QUERIES.items()
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def models_file(path: Path, server, concurrency: int = 4) -> Path:
    path.write_text(
        "models:\n"
        f"  - {{id: scripted, kind: llm, litellm: openai/scripted, api_base: '{server.base_url}',"
        f" timeout: 10, concurrency: {concurrency}}}\n"
        "  - {id: bow, kind: embedder, builtin: bow}\n"
    )
    return path


def run_annotate(tmp_path: Path, server, *extra: str, output: str = "out.jsonl") -> int:
    return main(
        [
            "annotate",
            str(tmp_path / "in.jsonl"),
            str(tmp_path / output),
            "--judges",
            "scripted",
            "--models-file",
            str(tmp_path / "models.yaml"),
            "--no-response-cache",
            "--no-progress",
            *extra,
        ]
    )


@pytest.fixture
def project(tmp_path, server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    server.answer = knows_the_labels
    dataset(tmp_path / "in.jsonl")
    models_file(tmp_path / "models.yaml", server)
    return tmp_path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def scores_of(path: Path) -> dict[str, dict[str, float]]:
    return {line["query"]["id"]: {d["id"]: d["score"] for d in line["documents"]} for line in read_jsonl(path)}


def test_annotate_writes_zbench_output_and_a_readable_pairs_file(project, server, capsys):
    assert run_annotate(project, server, "--both-orders") == 0
    out = read_jsonl(project / "out.jsonl")
    assert [line["query"]["id"] for line in out] == ["q1", "q2"]
    first = out[0]["documents"]
    assert [d["id"] for d in first] == ["m1", "m2", "m3", "m4", "m5", "m6"]  # input order kept
    assert first[0]["metadata"] == {"source": "m1.txt"} and first[0]["content"] == text("m1")
    scores = scores_of(project / "out.jsonl")
    assert max(scores["q1"], key=scores["q1"].get) == "m1" and max(scores["q2"], key=scores["q2"].get) == "g2"
    assert abs(sum(scores["q1"].values())) < 1e-4  # natural-log units, mean 0
    pairs = read_jsonl(project / "out.pairs.jsonl")
    assert len(pairs) == server.count()
    assert all(p["reasoning"].startswith("compared ") and p["valid"] and p["judge"] == "scripted" for p in pairs)
    assert {p["query_id"] for p in pairs} == {"q1", "q2"}
    printed = capsys.readouterr().out
    assert f"judgements: {len(pairs)} ({len(pairs)} made now, 0 resumed from" in printed
    assert ", 0 invalid" in printed


def test_a_second_run_resumes_without_judging_again(project, server, capsys):
    run_annotate(project, server)
    calls = server.count()
    before = scores_of(project / "out.jsonl")
    (project / "out.jsonl").unlink()
    pairs = (project / "out.pairs.jsonl").read_text().splitlines(keepends=True)
    assert run_annotate(project, server) == 0
    assert server.count() == calls  # nothing asked again, even without the response cache
    assert scores_of(project / "out.jsonl") == before
    (project / "out.pairs.jsonl").write_text("".join(pairs[: len(pairs) // 2]))
    run_annotate(project, server)
    assert server.count() == calls + len(pairs) - len(pairs) // 2  # only the missing half
    assert scores_of(project / "out.jsonl") == before
    assert f"{len(pairs) // 2} resumed" in capsys.readouterr().out.splitlines()[-2]


def test_elo_scale_cycles_and_seed(project, server):
    run_annotate(project, server, "--scale", "elo", "--cycles", "2", "--seed", "3", output="elo.jsonl")
    scores = scores_of(project / "elo.jsonl")["q1"]
    assert sum(scores.values()) / len(scores) == pytest.approx(1000.0, abs=1e-3)
    assert len(read_jsonl(project / "elo.pairs.jsonl")) <= 2 * 6 + 2 * 5


def test_invalid_answers_are_recorded_with_their_reason(project, server, capsys):
    server.on(text("m4"), Reply.text("no idea"))
    run_annotate(project, server)
    invalid = [p for p in read_jsonl(project / "out.pairs.jsonl") if not p["valid"]]
    assert invalid and all(p["invalid_reason"] == "no score found" and p["calls"] == 2 for p in invalid)
    assert all("m4" in (p["a"], p["b"]) for p in invalid)
    assert f", {len(invalid)} invalid" in capsys.readouterr().out


def test_several_judges_are_recorded_apart_and_combined(project, server):
    assert run_annotate(project, server, "--judges", "scripted,bow", "--combine", "mean") == 0
    pairs = read_jsonl(project / "out.pairs.jsonl")
    by_judge = {judge: [p for p in pairs if p["judge"] == judge] for judge in ("scripted", "bow")}
    assert len(by_judge["scripted"]) == len(by_judge["bow"]) > 0
    assert all(p["reasoning"].startswith("similarity A") for p in by_judge["bow"])


# A model error cancels the judgements in flight; litellm then drops a coroutine it had not
# started, which warns and is harmless.
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_problems_are_one_line(project, server, capsys):
    (project / "bad.jsonl").write_text('{"query": {"id": "q"}, "documents": []}\n')
    assert main(["annotate", "bad.jsonl", "o.jsonl", "--judges", "bow", "--models-file", "models.yaml"]) == 1
    assert capsys.readouterr().err.strip() == 'error: bad.jsonl: line 1: needs "query": {"id": ..., "query": "..."}'
    assert main(["annotate", "in.jsonl", "o.jsonl", "--judges", "gpt-9", "--models-file", "models.yaml"]) == 1
    assert "unknown model 'gpt-9'" in capsys.readouterr().err
    server.on(text("m1"), Reply.error(400))
    assert run_annotate(project, server) == 1
    error = capsys.readouterr().err
    assert "HTTP 400" in error and "run again to resume" in error
    assert not (project / "out.jsonl").exists() and (project / "out.pairs.jsonl").exists()


@pytest.mark.slow
def test_annotate_resumes_after_a_kill(project, server, tmp_path):
    server.latency = 0.3
    models_file(project / "models.yaml", server, concurrency=2)
    pairs = project / "out.pairs.jsonl"
    command = [sys.executable, "-m", "plugin", "annotate", "in.jsonl", "out.jsonl", "--judges", "scripted"]
    command += ["--models-file", "models.yaml", "--no-response-cache"]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, cwd=project, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not pairs.exists() or len(pairs.read_bytes().splitlines()) < 4):
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with open(pairs, "ab") as handle:  # as if the kill had landed mid-write
        handle.write(b'{"key": "torn", "query_id": "q')
    recorded = len(pairs.read_bytes().splitlines()) - 1
    assert not (project / "out.jsonl").exists()
    server.latency = 0.0
    calls = server.count()
    assert run_annotate(project, server) == 0
    total = len(read_jsonl_lenient(pairs))
    assert 4 <= recorded < total
    assert server.count() - calls == total - recorded  # only what was not recorded is asked
    # the same result as a run that was never interrupted
    (project / "clean").mkdir()
    run_annotate(project, server, output="clean/out.jsonl")
    assert scores_of(project / "out.jsonl") == scores_of(project / "clean/out.jsonl")


def read_jsonl_lenient(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


# --- rerank-eval ------------------------------------------------------------------------------


def annotated(path: Path, queries: dict[str, dict[str, float]]) -> Path:
    lines = [
        {"query": {"id": q, "query": q}, "documents": [{"id": d, "content": d, "score": s} for d, s in docs.items()]}
        for q, docs in queries.items()
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_rerank_eval_on_a_hand_computed_example(tmp_path, capsys):
    truth = annotated(tmp_path / "gt.jsonl", {"q1": {"a": 2.0, "b": 1.0, "c": 0.0, "d": -1.0}, "q2": {"x": 1, "y": 0}})
    system = annotated(tmp_path / "sys.jsonl", {"q1": {"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.0}})
    assert main(["rerank-eval", str(truth), str(system), "--k", "2"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "queries: 1 (1 missing from " + str(system) + ", left out)"
    found = {label.strip(): float(value) for label, value in (line.rsplit(None, 1) for line in printed[1:])}
    # the system ranks b, c, a, d. NDCG@2 with gain exp(zELO): (e + 1/log2 3) / (e^2 + e/log2 3)
    ndcg = (math.e + 1 / math.log2(3)) / (math.e**2 + math.e / math.log2(3))
    assert found["NDCG@2 (exp gain)"] == pytest.approx(ndcg, abs=1e-4)
    assert found["pairwise accuracy"] == pytest.approx(4 / 6, abs=1e-4)  # a<b, a<c wrong; 4 pairs right
    assert found["recall@2 (k_gt 2)"] == 0.5  # top 2 {b, c} against the truth's {a, b}
    assert found["Kendall tau-b"] == pytest.approx(1 / 3, abs=1e-4)  # (4 concordant - 2 discordant) / 6


def test_rerank_eval_reports_missing_queries_and_linear_gains(tmp_path, capsys):
    truth = annotated(tmp_path / "gt.jsonl", {"q1": {"a": 3, "b": 0, "c": 1}, "q2": {"x": 1, "y": 0}})
    system = annotated(tmp_path / "sys.jsonl", {"q1": {"a": 0.9, "b": 0.1, "c": 0.5}})
    assert main(["rerank-eval", str(truth), str(system), "--k", "2", "--gain", "linear", "--per-query"]) == 0
    out = capsys.readouterr().out
    assert "queries: 1 (1 missing from" in out
    assert "q1\t1.0000\t1.0000\t1.0000\t1.0000" in out
    negative = annotated(tmp_path / "neg.jsonl", {"q1": {"a": -1.0, "b": 0.0}})
    assert main(["rerank-eval", str(negative), str(system), "--gain", "linear"]) == 1


# --- heatmap ----------------------------------------------------------------------------------


def test_heatmaps_from_an_annotated_file_and_from_benchmark_rows(project, server, capsys):
    run_annotate(project, server, "--both-orders")
    assert main(["heatmap", "out.jsonl", "--query", "q1", "-o", "q1.png"]) == 0
    assert (project / "q1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote q1.png (6 documents" in capsys.readouterr().out
    row = {
        "key": "k",
        "family": "zelo_battles",
        "test": "test_zelo_battles",
        "model": "bow",
        "case": "case",
        "item": "case:json",
        "scoring_version": 1,
        "status": "ok",
        "iterations": [{"zelo": {"a": 0.5, "b": -0.5}, "battles": [["a", "b", -1.0], ["b", "a", None]]}],
    }
    (project / "zelo_battles.jsonl").write_text(json.dumps(row) + "\n")
    assert main(["heatmap", "zelo_battles.jsonl", "--query", "case:json", "-o", "row.png"]) == 0
    assert (project / "row.png").stat().st_size > 1000
    assert main(["heatmap", "zelo_battles.jsonl", "--query", "other"]) == 1


def test_the_preference_matrix():
    from plugin.report.heatmap import preference_matrix

    matrix = preference_matrix(["a", "b", "c"], [("a", "b", -1.0), ("b", "a", 0.5), ("c", "a", None)])
    # (a, b, -1): A = a is preferred, a over b +1; (b, a, 0.5): B = a is preferred, +0.5; mean 0.75
    assert matrix[0][1] == pytest.approx(0.75) and matrix[1][0] == pytest.approx(-0.75)
    assert matrix[0][2] is None and matrix[1][1] is None


def test_pairs_path():
    assert annotate.pairs_path(Path("data/x_annotated.jsonl")) == Path("data/x_annotated.pairs.jsonl")
    assert annotate.pairs_path(Path("out")) == Path("out.pairs.jsonl")


def test_a_similarity_judgement_depends_on_the_document_set_and_an_llm_one_on_the_prompt():
    from types import SimpleNamespace

    from plugin.zelo.annotate import JudgeModel, judgement_key

    bm25 = JudgeModel("bm25", SimpleNamespace(kind="retriever"), {"provider": "builtin", "model": "bm25@1"})
    llm = JudgeModel("gpt", SimpleNamespace(kind="llm"), {"provider": "litellm", "model": "openai/x"})
    few, more = ["a", "b"], ["a", "b", "c"]
    assert judgement_key("q", "a", "b", bm25, "p", few) != judgement_key("q", "a", "b", bm25, "p", more)
    assert judgement_key("q", "a", "b", bm25, "p", few) == judgement_key("q", "a", "b", bm25, "other", few)
    assert judgement_key("q", "a", "b", llm, "p", few) == judgement_key("q", "a", "b", llm, "p", more)
    assert judgement_key("q", "a", "b", llm, "p", few) != judgement_key("q", "a", "b", llm, "other", few)

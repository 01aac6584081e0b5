"""The command line: `annotate` (zbench format, resumable, also after a kill), `rerank-eval`
on a hand-computed example, and `heatmap`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from project import REPO

from ragmatrix.cli import main
from ragmatrix.testing.openai_server import Reply
from ragmatrix.zelo import annotation

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
    printed = capsys.readouterr()
    assert f", {len(invalid)} invalid" in printed.out
    # m4 is linked to nothing: q1's comparison graph falls into two components
    assert "note: query q1: the valid judgements link its documents in 2 separate groups" in printed.err
    assert "query q2" not in printed.err


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
    error = capsys.readouterr().err
    assert error.startswith("error: unknown model 'gpt-9' in --judges (models.yaml has: bow, scripted)")
    assert "--models " not in error and len(error.strip().splitlines()) == 1
    # The refusal comes last, so that the judgements made before it are in the pairs file.
    server.on(text("m1"), Reply.error(400, delay=1.0))
    assert run_annotate(project, server) == 1
    error = capsys.readouterr().err
    assert "HTTP 400" in error and "run again to resume" in error
    assert not (project / "out.jsonl").exists() and (project / "out.pairs.jsonl").exists()


def test_a_refused_request_ends_the_command_with_its_clients_closed(project, server):
    """The run's end cancels what still runs and closes the HTTP sessions on their loop: the
    process says nothing of an unclosed session or a task destroyed while pending."""
    server.on(text("m1"), Reply.error(400))
    done = run_cli(
        project,
        *("annotate", "in.jsonl", "out.jsonl", "--judges", "scripted", "--models-file", "models.yaml"),
        *("--no-response-cache", "--no-progress"),
    )
    assert done.returncode == 1 and "HTTP 400" in done.stderr
    for complaint in ("Unclosed", "was destroyed but it is pending", "Traceback"):
        assert complaint not in done.stderr, done.stderr


@pytest.mark.slow
def test_annotate_resumes_after_a_kill(project, server, tmp_path):
    answers = threading.Semaphore(4)  # four judgements end; the others wait for answers until the kill

    def four_answers_then_none(messages: list[dict]) -> str:
        answers.acquire(timeout=300)
        return knows_the_labels(messages)

    server.answer = four_answers_then_none
    models_file(project / "models.yaml", server, concurrency=2)
    pairs = project / "out.pairs.jsonl"
    command = [sys.executable, "-m", "ragmatrix", "annotate", "in.jsonl", "out.jsonl", "--judges", "scripted"]
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
    answers.release(1000)  # the next runs are answered at once
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


# --- zbench round trip ------------------------------------------------------------------------

# zbench's DatasetPairScoredPairs, field by field: {"scored_pairs": [{"pair": {...}, three scores}]}
PAIR_FIELDS = {"pair_id": str, "query_id": str, "query": str, "document_a": dict, "document_b": dict}
DOCUMENT_FIELDS = {"document_id": str, "metadata": dict, "content": str}
SCORE_FIELDS = ("openai_score", "gemini_score", "anthropic_score")


def test_the_pairs_in_zbench_shape(project, server, capsys):
    assert run_annotate(project, server, "--zbench-pairs", "ai_scores.json") == 0
    scored = json.loads((project / "ai_scores.json").read_text())["scored_pairs"]
    records = read_jsonl(project / "out.pairs.jsonl")
    # one entry per matchup, as zbench lists them: 4 cycles of 6 and of 5 documents; a pair
    # drawn again in the same order is judged once and listed each time it was drawn
    assert len(scored) == 4 * 6 + 4 * 5 > len(records)
    by_pair = {(r["query_id"], r["a"], r["b"]): r for r in records}
    for entry in scored:
        assert set(entry) == {"pair", *SCORE_FIELDS}
        pair = entry["pair"]
        assert {name: type(pair[name]) for name in PAIR_FIELDS} == PAIR_FIELDS
        for side in ("document_a", "document_b"):
            assert {name: type(pair[side][name]) for name in DOCUMENT_FIELDS} == DOCUMENT_FIELDS
        a, b = pair["document_a"]["document_id"], pair["document_b"]["document_id"]
        assert pair["pair_id"] == f"{pair['query_id']}-{a}-{b}" and pair["document_a"]["content"] == text(a)
        assert pair["document_a"]["metadata"] == {"source": f"{a}.txt"}
        record = by_pair[(pair["query_id"], a, b)]
        # one judge fills zbench's three fields; the score is for the documents as listed
        for name in SCORE_FIELDS:
            assert entry[name] == {"thought": record["reasoning"], "score": record["score"]}
        assert record["score"] == pytest.approx((LABELS[b] - LABELS[a]) / 3)
    assert f"zbench pairs: {len(scored)} in ai_scores.json" in capsys.readouterr().out


def test_zbench_pairs_leave_out_invalid_judgements_and_need_one_or_three_judges(project, server, capsys):
    server.on(text("m4"), Reply.text("no idea"))
    assert run_annotate(project, server, "--zbench-pairs", "ai_scores.json") == 0
    scored = json.loads((project / "ai_scores.json").read_text())["scored_pairs"]
    invalid = [r for r in read_jsonl(project / "out.pairs.jsonl") if not r["valid"]]
    assert invalid and all(
        "m4" not in (e["pair"]["document_a"]["document_id"], e["pair"]["document_b"]["document_id"]) for e in scored
    )
    # m4 takes part in two matchups of each of the 4 cycles
    assert len(scored) == 4 * 6 + 4 * 5 - 2 * 4
    assert "(8 left out: a judge gave no valid score)" in capsys.readouterr().out
    assert run_annotate(project, server, "--judges", "scripted,bow", "--zbench-pairs", "two.json") == 1
    error = capsys.readouterr().err.strip()
    assert (
        error == "error: --zbench-pairs: zbench's pairs file holds three judges' scores: give one judge or three, not 2"
    )
    assert not (project / "two.json").exists()


def test_an_elo_annotation_records_its_scale_and_serves_as_ground_truth(project, server, capsys):
    assert run_annotate(project, server, "--scale", "elo", output="elo.jsonl") == 0
    assert run_annotate(project, server, output="z.jsonl") == 0
    assert {line["zelo_scale"] for line in read_jsonl(project / "elo.jsonl")} == {"elo"}
    assert {line["zelo_scale"] for line in read_jsonl(project / "z.jsonl")} == {"z"}
    system = {q: {d: float(LABELS[d]) + 0.1 * i for i, d in enumerate(docs)} for q, (_, docs) in QUERIES.items()}
    lines = [
        {"query": {"id": q, "query": q}, "documents": [{"id": d, "content": d, "score": s} for d, s in docs.items()]}
        for q, docs in system.items()
    ]
    (project / "system.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    capsys.readouterr()
    results = []
    for truth in ("elo.jsonl", "z.jsonl"):
        assert main(["rerank-eval", truth, "system.jsonl", "--k", "3"]) == 0
        results.append(capsys.readouterr().out.splitlines()[2:])
    assert results[0] == results[1]


def test_mostly_invalid_judgements_exit_1_in_one_line_and_keep_the_files(project, server, capsys):
    server.answer = "I would rather not say."
    assert run_annotate(project, server) == 1
    error = capsys.readouterr().err.strip().splitlines()
    total = len(read_jsonl(project / "out.pairs.jsonl"))
    assert error[-1] == (
        f"error: {total} of {total} judgements are invalid, so the zELOs in {project / 'out.jsonl'} rest on too "
        f"little: check the judge and its prompt (the reasons are in {project / 'out.pairs.jsonl'}, "
        "kept with the output)"
    )
    assert all(line.startswith("note: query") for line in error[:-1])  # which queries fell apart
    assert (project / "out.jsonl").exists()


def test_documents_beyond_the_limit_are_left_out_and_said(project, server, capsys):
    assert run_annotate(project, server, "--document-limit", "4") == 0
    out = read_jsonl(project / "out.jsonl")
    assert [[d["id"] for d in line["documents"]] for line in out] == [
        ["m1", "m2", "m3", "m4"],
        ["g1", "g2", "g3", "g4"],
    ]
    assert "note: 3 documents beyond --document-limit 4 were not judged" in capsys.readouterr().err


# --- the command line from anywhere -----------------------------------------------------------


def run_cli(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "ragmatrix", *arguments]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_models_file_is_found_from_a_subfolder_and_named_when_missing(tmp_path, server):
    project = tmp_path / "project"
    deeper = project / "data" / "queries"
    deeper.mkdir(parents=True)
    (project / "benchmark").mkdir()
    models_file(project / "benchmark" / "models.yaml", server)
    dataset(deeper / "in.jsonl")
    server.answer = knows_the_labels
    found = run_cli(deeper, "annotate", "in.jsonl", "out.jsonl", "--judges", "scripted", "--no-progress")
    assert found.returncode == 0, found.stderr
    # the run's root is the project's: the LLM's answers are cached there
    assert (deeper / "out.jsonl").exists() and (project / ".benchmark_cache" / "responses.sqlite").is_file()
    unknown = run_cli(deeper, "annotate", "in.jsonl", "o.jsonl", "--judges", "nosuch")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: unknown model 'nosuch' in --judges (")
    assert "--models " not in unknown.stderr

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    dataset(outside / "in.jsonl")
    missing = run_cli(outside, "annotate", "in.jsonl", "out.jsonl", "--judges", "bow")
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    tried = [outside / "benchmark" / "models.yaml", tmp_path / "benchmark" / "models.yaml"]
    assert all(str(path.resolve()) in missing.stderr for path in tried)
    assert missing.stderr.strip().endswith("give the file with --models-file")
    given = run_cli(
        outside,
        "annotate",
        "in.jsonl",
        "out.jsonl",
        "--judges",
        "bow",
        "--models-file",
        str(project / "benchmark" / "models.yaml"),
        "--no-progress",
    )
    assert given.returncode == 0, given.stderr
    absent = run_cli(outside, "annotate", "in.jsonl", "out.jsonl", "--models-file", "nope.yaml")
    assert absent.stderr.strip() == "error: --models-file nope.yaml: file not found"


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
    from ragmatrix.zelo.heatmap import preference_matrix

    matrix = preference_matrix(["a", "b", "c"], [("a", "b", -1.0), ("b", "a", 0.5), ("c", "a", None)])
    # (a, b, -1): A = a is preferred, a over b +1; (b, a, 0.5): B = a is preferred, +0.5; mean 0.75
    assert matrix[0][1] == pytest.approx(0.75) and matrix[1][0] == pytest.approx(-0.75)
    assert matrix[0][2] is None and matrix[1][1] is None


def test_pairs_path():
    assert annotation.pairs_path(Path("data/x_annotated.jsonl")) == Path("data/x_annotated.pairs.jsonl")
    assert annotation.pairs_path(Path("out")) == Path("out.pairs.jsonl")


def test_a_similarity_judgement_depends_on_the_document_set_and_an_llm_one_on_the_prompt():
    from types import SimpleNamespace

    from ragmatrix.zelo.annotation import JudgeModel, judgement_key

    bm25 = JudgeModel("bm25", SimpleNamespace(kind="retriever"), {"provider": "builtin", "model": "bm25@1"})
    llm = JudgeModel("gpt", SimpleNamespace(kind="llm"), {"provider": "litellm", "model": "openai/x"})
    few, more = ["a", "b"], ["a", "b", "c"]
    assert judgement_key("q", "a", "b", bm25, "p", few) != judgement_key("q", "a", "b", bm25, "p", more)
    assert judgement_key("q", "a", "b", bm25, "p", few) == judgement_key("q", "a", "b", bm25, "other", few)
    assert judgement_key("q", "a", "b", llm, "p", few) == judgement_key("q", "a", "b", llm, "p", more)
    assert judgement_key("q", "a", "b", llm, "p", few) != judgement_key("q", "a", "b", llm, "other", few)

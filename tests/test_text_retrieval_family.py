"""BEIR-format datasets: a small folder with graded qrels whose nDCG@10 is worked out by hand, a
Hugging Face dataset in MTEB's layout read from a local folder, the shipped pydoc dataset, and
a run end to end."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from project import REPO, assert_outcomes, write

from ragmatrix.families.text_retrieval import beir
from ragmatrix.families.text_retrieval import retrieval as text_retrieval
from ragmatrix.models.bm25 import BM25Retriever
from ragmatrix.models.lexical import HashingBagOfWords
from ragmatrix.models.spec import ModelSpec
from ragmatrix.suite.loader import load_suite

BM25 = BM25Retriever(ModelSpec(id="bm25", kind="retriever", builtin="bm25"))

CORPUS = [
    {"_id": "d1", "title": "Fruit", "text": "apple banana"},
    {"_id": "d2", "title": "", "text": "apple"},
    {"_id": "d3", "title": "", "text": "cherry"},
    {"_id": "d4", "title": "", "text": "banana"},
    {"_id": "q2", "title": "", "text": "cherry cherry"},  # shares the id of a query: never ranked for it
]
QUERIES = [
    {"_id": "q1", "text": "apple banana"},
    {"_id": "q2", "text": "cherry"},
    {"_id": "q3", "text": "nothing judged relevant"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq1\td4\t0\nq2\td3\t1\nq3\td1\t0\n"


def beir_folder(root: Path) -> Path:
    folder = root / "tiny_beir"
    write(folder / "corpus.jsonl", "".join(json.dumps(row) + "\n" for row in CORPUS))
    write(folder / "queries.jsonl", "".join(json.dumps(row) + "\n" for row in QUERIES))
    write(folder / "qrels" / "test.tsv", QRELS)
    return folder


CASES = """
text_retrieval:
  - case: tiny
    input:
      dataset: {path: tiny_beir}
    tags: [toy]
"""


def tiny_cases(root: Path) -> dict:
    beir_folder(root)
    write(root / "text_retrieval_data.yaml", CASES)
    suite = load_suite(root, ["text_retrieval"], root=root)
    assert suite.problems == []
    return {case.name: case for case in suite.cases["text_retrieval"]}


def test_each_judged_query_is_a_case_with_its_graded_qrels(tmp_path):
    cases = tiny_cases(tmp_path)
    assert sorted(cases) == ["tiny.q1", "tiny.q2"]  # q3 has no relevant document
    q1 = cases["tiny.q1"]
    assert (q1.input.query_id, q1.input.query, q1.expected.qrels) == ("q1", "apple banana", {"d1": 1, "d2": 2, "d4": 0})
    assert q1.metadata == {"tags": ["toy"]}


def test_graded_ndcg_at_10_of_a_bm25_ranking_checked_by_hand(tmp_path):
    cases = tiny_cases(tmp_path)
    q1 = cases["tiny.q1"]
    ranking = text_retrieval.search(BM25, q1)
    # BM25: d1 holds both words; d2 and d4 one each, with the same idf and length (a tie, kept in
    # corpus order); d3 and the document q2 none (score 0, corpus order).
    assert [doc for doc, _ in ranking.documents] == ["d1", "d2", "d4", "d3", "q2"]
    # gains 1, 2, 0, 0, 0: DCG = 1/log2(2) + 2/log2(3); ideal gains 2, 1: IDCG = 2/log2(2) + 1/log2(3)
    dcg = 1 + 2 / math.log2(3)
    idcg = 2 + 1 / math.log2(3)
    values = text_retrieval.metrics(q1, ranking)
    assert values["ndcg_at_10"] == pytest.approx(dcg / idcg, abs=1e-6) == pytest.approx(0.859719, abs=1e-6)
    assert values["mrr_at_10"] == 1.0 and values["precision_at_1"] == 1.0 and values["recall_at_10"] == 1.0
    outcome = text_retrieval.score(q1, ranking).to_json()
    assert outcome["score"] == values["ndcg_at_10"]
    assert outcome["top_documents"][:2] == [
        {"id": "d1", "score": pytest.approx(outcome["top_documents"][0]["score"]), "grade": 1},
        {"id": "d2", "score": pytest.approx(outcome["top_documents"][1]["score"]), "grade": 2},
    ]
    assert (outcome["dataset"], outcome["tags"], outcome["corpus_size"]) == ("path tiny_beir", ["toy"], 5)


def test_the_querys_own_id_is_never_ranked_as_in_beir(tmp_path):
    q2 = tiny_cases(tmp_path)["tiny.q2"]
    ranking = text_retrieval.search(BM25, q2)
    assert ranking.documents[0][0] == "d3" and "q2" not in [doc for doc, _ in ranking.documents]
    assert text_retrieval.metrics(q2, ranking)["ndcg_at_10"] == 1.0


def test_a_hand_ranked_list_with_a_relevant_document_missed():
    case = type("C", (), {"expected": type("E", (), {"qrels": {"a": 3, "b": 1, "z": 2}})()})()
    ranking = text_retrieval.rank(["x", "a", "b", "y"], [0.9, 0.8, 0.1, 0.5])
    assert [doc for doc, _ in ranking.documents] == ["x", "a", "y", "b"]
    # gains 0, 3, 0, 1; ideal 3, 2, 1 (z is never retrieved but counts in the ideal)
    dcg = 3 / math.log2(3) + 1 / math.log2(5)
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    values = text_retrieval.metrics(case, ranking)
    assert values["ndcg_at_10"] == pytest.approx(dcg / idcg, abs=1e-6)
    assert values["recall_at_10"] == pytest.approx(2 / 3, abs=1e-6) and values["mrr_at_10"] == 0.5


def test_dataset_problems_are_lines_with_the_case(tmp_path, fresh_run):
    write(tmp_path / "text_retrieval_data.yaml", CASES)
    lines = [p.line() for p in load_suite(tmp_path, ["text_retrieval"], root=tmp_path).problems]
    assert lines == ["text_retrieval_data.yaml: case 'tiny': dataset path tiny_beir not found"]
    beir_folder(tmp_path)
    (tmp_path / "tiny_beir" / "qrels" / "test.tsv").unlink()
    lines = [p.line() for p in load_suite(tmp_path, ["text_retrieval"], root=tmp_path).problems]
    assert lines == ["text_retrieval_data.yaml: case 'tiny': dataset path tiny_beir has no qrels/test.tsv"]


BINARY = bytes(range(128, 256)) + bytes(range(256)) * 8  # as a compiled file: 0x80 is no UTF-8


@pytest.mark.parametrize(
    ("file", "line"),
    [
        ("queries.jsonl", "queries.jsonl line 1: not UTF-8 text (byte 0x80); BEIR files are UTF-8"),
        ("qrels/test.tsv", "qrels/test.tsv line 1: not UTF-8 text (byte 0x80); BEIR files are UTF-8"),
    ],
)
def test_a_binary_queries_or_qrels_file_is_one_problem_line(tmp_path, fresh_run, file, line):
    write(tmp_path / "text_retrieval_data.yaml", CASES)
    beir_folder(tmp_path)
    (tmp_path / "tiny_beir" / file).write_bytes(BINARY)
    lines = [p.line() for p in load_suite(tmp_path, ["text_retrieval"], root=tmp_path).problems]
    assert lines == [f"text_retrieval_data.yaml: case 'tiny': {line}"]


HF_README = """---
configs:
- config_name: corpus
  data_files:
  - split: corpus
    path: corpus.jsonl
- config_name: queries
  data_files:
  - split: queries
    path: queries.jsonl
- config_name: default
  data_files:
  - split: test
    path: qrels/test.jsonl
---
"""


@pytest.mark.slow
def test_a_hugging_face_dataset_in_mteb_layout_is_read_through_datasets_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    write(repo / "README.md", HF_README)
    write(repo / "corpus.jsonl", "".join(json.dumps(row) + "\n" for row in CORPUS))
    write(repo / "queries.jsonl", "".join(json.dumps(row) + "\n" for row in QUERIES))
    qrels = [line.split("\t") for line in QRELS.splitlines()[1:]]
    rows = [{"query-id": q, "corpus-id": d, "score": int(s)} for q, d, s in qrels]
    write(repo / "qrels" / "test.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    write(
        tmp_path / "text_retrieval_data.yaml",
        f"text_retrieval:\n  - case: hub\n    input:\n      dataset: {{hf: {repo}}}\n",
    )
    suite = load_suite(tmp_path, ["text_retrieval"], root=tmp_path)
    assert suite.problems == []
    q1 = {c.name: c for c in suite.cases["text_retrieval"]}["hub.q1"]
    assert q1.expected.qrels == {"d1": 1, "d2": 2, "d4": 0}
    assert text_retrieval.metrics(q1, text_retrieval.search(BM25, q1))["ndcg_at_10"] == pytest.approx(
        0.859719, abs=1e-6
    )
    # a later collection reads the queries and judgements back without importing datasets
    script = (
        "import sys; from pathlib import Path\n"
        "from ragmatrix.suite.loader import load_suite\n"
        f"suite = load_suite(Path({str(tmp_path)!r}), ['text_retrieval'])\n"
        "print(len(suite.cases['text_retrieval']), 'datasets' in sys.modules)\n"
    )
    environment = {"RAGMATRIX_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "False"]


def test_the_shipped_pydoc_dataset_has_graded_judgements_on_real_documents():
    data = REPO / "benchmark" / "data"
    cases = load_suite(data, ["text_retrieval"], root=REPO).cases["text_retrieval"]
    assert len(cases) == 30
    documents = beir.corpus(cases[0].input.dataset, data)
    assert len(documents.ids) == 78 and "try" in documents.ids and "else" not in documents.ids
    assert all(doc in documents.ids for case in cases for doc in case.expected.qrels)
    assert sum(2 in case.expected.qrels.values() for case in cases) == 30
    assert sum(1 in case.expected.qrels.values() for case in cases) >= 20


# --- end to end --------------------------------------------------------------------------------


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write(
        pytester.path / "benchmark" / "models.yaml",
        "models:\n  - {id: bm25, kind: retriever, builtin: bm25}\n  - {id: bow, kind: embedder, builtin: bow}\n",
    )
    shutil.copy(REPO / "benchmark" / "test_text_retrieval.py", pytester.path / "benchmark" / "test_text_retrieval.py")
    data = pytester.path / "benchmark" / "data"
    beir_folder(data)
    write(data / "text_retrieval_data.yaml", CASES)
    return pytester


def test_a_beir_folder_runs_end_to_end_on_the_leaderboard_and_reruns_from_the_store(project):
    result = project.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["*ragmatrix leaderboard*", "text_retrieval: nDCG@10, scale 0..1*", "*bm25*0.930*2*2*2*0*0*", "*ndcg_at_10*"]
    )
    rows = [
        json.loads(line) for line in (project.path / "benchmark/results/text_retrieval.jsonl").read_text().splitlines()
    ]
    assert {(r["model"], r["case"]) for r in rows} == {(m, c) for m in ("bm25", "bow") for c in ("tiny.q1", "tiny.q2")}
    assert_outcomes(project.runpytest("benchmark", "-p", "no:cacheprovider"), cached=4)


def test_a_binary_corpus_file_is_one_line_per_item_not_a_traceback(project):
    (project.path / "benchmark" / "data" / "tiny_beir" / "corpus.jsonl").write_bytes(BINARY)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        ["error in 1 of 1 iteration(s): case 'tiny.q1': corpus.jsonl line 1: not UTF-8 text (byte 0x80); *"]
    )
    assert "Traceback" not in result.stdout.str() and "UnicodeDecodeError" not in result.stdout.str()


def test_an_embedder_embeds_every_query_of_the_run_in_one_batch(project, monkeypatch):
    calls: list[list[str]] = []
    embed = HashingBagOfWords.embed

    def counted(self, texts):
        calls.append(list(texts))
        return embed(self, texts)

    monkeypatch.setattr(HashingBagOfWords, "embed", counted)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", "--no-response-cache", "-k", "bow")
    result.assert_outcomes(passed=2)
    queries = [call for call in calls if "cherry" in call and len(call) < len(CORPUS)]
    # the two judged queries in one call, not one call per item; the corpus is indexed apart, as
    # sparse rows of every document (the bag-of-words baseline keeps no vectors to reuse)
    assert queries[0] == ["apple banana", "cherry"]
    assert all(len(call) == 1 for call in queries[1:])
    batches = [call for call in calls if len(call) > 1]
    assert sorted(len(call) for call in batches) == [2, len(CORPUS)]


def test_code_retrieval_declares_its_query_for_the_batch_too():
    from ragmatrix.families.code_retrieval import FAMILY

    case = SimpleNamespace(input=SimpleNamespace(query="where is the parser"))
    assert FAMILY.first_texts is not None
    assert FAMILY.first_texts(case, None) == (["where is the parser"], [])

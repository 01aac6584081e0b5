"""The code retrieval family: corpora, the BM25 retriever, scoring, the shipped cases, and a
pytester run on a tiny corpus."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from dense_words import DenseWords
from project import REPO, assert_outcomes, bag_of_words, write

from ragmatrix.families import all_families
from ragmatrix.families.code_retrieval import retrieval as code_retrieval
from ragmatrix.families.code_retrieval.chunking import Chunk
from ragmatrix.families.code_retrieval.corpus import CorpusSpec, corpora, list_files, load_corpus, locate, stdlib_root
from ragmatrix.foundations.context import start_run
from ragmatrix.models.bm25 import BM25Retriever, code_tokens
from ragmatrix.models.embedding_cache import EmbeddingCache
from ragmatrix.models.lexical import HashingBagOfWords
from ragmatrix.models.models_file import ModelSet
from ragmatrix.models.spec import ModelSpec
from ragmatrix.report.aggregate import aggregate
from ragmatrix.report.terminal import metric_tables
from ragmatrix.results.rows import Row
from ragmatrix.seam.case import CaseInputError
from ragmatrix.suite.loader import expand_case

DATA_FILE = REPO / "benchmark" / "data" / "code_retrieval_data.yaml"


# --- the BM25 tokenizer and retriever ------------------------------------------------------------


def test_code_tokens_split_identifiers_and_keep_compounds_whole():
    assert code_tokens("JSONDecoder.raw_decode(parseHTTPResponse2)") == [
        "json",
        "decoder",
        "jsondecoder",
        "raw",
        "decode",
        "raw_decode",
        "parse",
        "http",
        "response",
        "2",
        "parsehttpresponse2",
    ]
    assert code_tokens("How to read the __init__ file?") == ["read", "init", "file"]  # stop words dropped
    assert code_tokens("") == []


def test_bm25_scores_documents_for_queries_without_vectors():
    bm25 = BM25Retriever(ModelSpec(id="bm25", kind="retriever", builtin="bm25"))
    documents = ["def raw_decode(self, s): pass", "class TextWrapper: width = 70", "import os"]
    matrix = bm25.score_matrix(["rawDecode", "text wrapper width", "nothing matches"], documents)
    assert matrix.shape == (3, 3)
    assert matrix[0].argmax() == 0 and matrix[1].argmax() == 1
    assert matrix[2].tolist() == [0.0, 0.0, 0.0]
    assert bm25.similarities("rawDecode", documents) == pytest.approx(matrix[0].tolist())
    assert bm25.score_matrix(["x"], []).shape == (1, 0)


def test_an_embedder_scores_a_matrix_like_its_similarities():
    bow = bag_of_words(ModelSpec(id="bow", kind="embedder", builtin="bow"))
    documents = ["the cat sat", "a dog ran", "cat and dog"]
    matrix = bow.score_matrix(["cat", "dog"], documents)
    assert matrix.shape == (2, 3)
    assert matrix[0].tolist() == pytest.approx(bow.similarities("cat", documents))
    assert bow.index_documents([]).score(["cat"]).shape == (1, 0)


def test_bm25_is_a_retriever_and_retriever_tests_run_on_embedders_too():
    bm25 = ModelSpec(id="bm25", kind="retriever", builtin="bm25")
    bow = ModelSpec(id="bow", kind="embedder", builtin="bow")
    llm = ModelSpec(id="llm", kind="llm", litellm="openai/x")
    models = ModelSet(available=[llm, bow, bm25])
    assert models.of_kind("retriever") == [bow, bm25]
    assert models.of_kind("embedder") == [bow]
    assert models.of_kind("judge") == [llm, bow, bm25]
    assert models.of_kind("llm") == [llm]
    with pytest.raises(ValueError, match="builtin bm25 is of kind retriever"):
        ModelSpec(id="x", kind="embedder", builtin="bm25")
    with pytest.raises(ValueError, match="builtin bow is of kind embedder"):
        ModelSpec(id="x", kind="retriever", builtin="bow")
    with pytest.raises(ValueError, match=r"a retriever is a builtin \(bm25\)"):
        ModelSpec(id="x", kind="retriever", litellm="openai/x")


# --- corpora -----------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for name, text in {
        "top.py": "TOP = 1\n",
        "README.md": "# Repo\n",
        "pkg/a.py": "def a():\n    return 1\n",
        "pkg/sub/b.py": "def b():\n    return 2\n",
        "pkg/sub/notes.txt": "notes\n",
        "pkg/.hidden/h.py": "HIDDEN = 1\n",
        "pkg/__pycache__/a.py": "cached\n",
        "node_modules/dep/index.py": "DEP = 1\n",
    }.items():
        write(root / name, text)
    (root / "pkg" / "blob.py").write_bytes(b"\x00\x01binary")
    return root


def test_globs_choose_files_and_skip_hidden_and_generated_folders(tree):
    assert list_files(tree, ["**/*.py"], []) == ["pkg/a.py", "pkg/blob.py", "pkg/sub/b.py", "top.py"]
    assert list_files(tree, ["**/*.py"], ["pkg/sub/**", "**/blob.py"]) == ["pkg/a.py", "top.py"]
    assert list_files(tree, ["pkg/*.py", "README.md"], []) == ["README.md", "pkg/a.py", "pkg/blob.py"]
    assert list_files(tree, ["pkg/**"], ["*.py"]) == ["pkg/a.py", "pkg/blob.py", "pkg/sub/b.py", "pkg/sub/notes.txt"]
    assert list_files(tree, ["p?g/[ab].py"], []) == ["pkg/a.py"]


def test_a_corpus_is_read_with_relative_paths_and_without_binary_files(tree):
    corpus = load_corpus(CorpusSpec(path="repo", include=["**/*.py"]), tree.parent)
    assert [f.path for f in corpus.files] == ["pkg/a.py", "pkg/sub/b.py", "top.py"]
    assert corpus.file("pkg/a.py") is not None and corpus.file("pkg/a.py").text == "def a():\n    return 1\n"
    assert corpus.label == "path repo"


def test_the_fingerprint_follows_relative_paths_and_contents_not_the_location(tree, tmp_path):
    spec = CorpusSpec(path=".", include=["**/*.py"])
    first = load_corpus(spec, tree).fingerprint
    copy = tmp_path / "elsewhere"
    shutil.copytree(tree, copy)
    assert load_corpus(spec, copy).fingerprint == first
    (copy / "pkg" / "a.py").write_text("def a():\n    return 3\n")
    changed = load_corpus(spec, copy).fingerprint
    assert changed != first
    (copy / "pkg" / "a.py").rename(copy / "pkg" / "renamed.py")
    assert load_corpus(spec, copy).fingerprint not in (first, changed)
    (copy / "pkg" / "sub" / "notes.txt").write_text("not chosen by the globs")
    assert load_corpus(spec, copy).fingerprint == load_corpus(spec, copy).fingerprint


def test_a_corpus_is_a_folder_an_installed_package_or_a_part_of_the_standard_library(tmp_path):
    assert locate(CorpusSpec(stdlib="."), tmp_path) == (stdlib_root(), None)
    assert locate(CorpusSpec(stdlib="json"), tmp_path) == (stdlib_root() / "json", None)
    assert locate(CorpusSpec(stdlib="textwrap"), tmp_path) == (stdlib_root(), ["textwrap.py"])
    assert locate(CorpusSpec(stdlib="xml.etree"), tmp_path) == (stdlib_root() / "xml" / "etree", None)
    assert locate(CorpusSpec(package="json"), tmp_path) == (stdlib_root() / "json", None)
    assert locate(CorpusSpec(package="textwrap"), tmp_path) == (stdlib_root(), ["textwrap.py"])
    corpus = load_corpus(CorpusSpec(stdlib="json", include=["*.py"]), tmp_path)
    assert "decoder.py" in corpus.paths and "__init__.py" in corpus.paths


def test_a_corpus_that_cannot_be_found_is_one_line(tmp_path):
    with pytest.raises(CaseInputError, match="^corpus path nowhere not found$"):
        load_corpus(CorpusSpec(path="nowhere"), tmp_path)
    with pytest.raises(CaseInputError, match="^package no_such_package_here is not installed$"):
        load_corpus(CorpusSpec(package="no_such_package_here"), tmp_path)
    with pytest.raises(CaseInputError, match="^no part 'no_such_module' in the Python standard library"):
        load_corpus(CorpusSpec(stdlib="no_such_module"), tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaseInputError, match=r"^corpus path empty \(include \*\*/\*\.go\) has no files$"):
        load_corpus(CorpusSpec(path="empty", include=["**/*.go"]), tmp_path)
    with pytest.raises(ValueError, match="give exactly one of path, package, stdlib"):
        CorpusSpec(path="a", stdlib="json")


# --- scoring -----------------------------------------------------------------------------------


def make_case(directory: Path, expected: dict, name: str = "q") -> object:
    raw = {
        "case": name,
        "input": {
            "corpus": {"path": "."},
            "chunking": {"semantic": {"strategy": "semantic"}},
            "query": "where is KEY",
            "query_type": "doc",
            "difficulty": "hard",
        },
        "expected": expected,
    }
    cases, problem = expand_case("code_retrieval", raw, "f.yaml", directory=directory)
    assert problem is None, problem
    return cases[0]


CHUNKS = [
    Chunk("a.py", 1, 10, "def alpha():\n    pass"),
    Chunk("b.py", 1, 5, "x = 1"),
    Chunk("a.py", 11, 20, "def beta():\n    return KEY"),
    Chunk("c.py", 1, 3, "KEY = 'also here, but c.py is not expected'"),
    Chunk("b.py", 6, 9, "y = 2"),
]
SCORES = [0.2, 0.9, 0.5, 0.8, 0.1]  # chunks ranked 1, 3, 2, 0, 4; files b, c, a


def ranking() -> code_retrieval.Ranking:
    return code_retrieval.rank(code_retrieval.Index(CHUNKS, None, {"chunks": 5}), SCORES)


def test_files_are_ranked_by_their_best_chunk():
    ranked = ranking()
    assert ranked.order == [1, 3, 2, 0, 4]
    assert ranked.files == [("b.py", 0.9), ("c.py", 0.8), ("a.py", 0.5)]
    tied = code_retrieval.rank(code_retrieval.Index(CHUNKS, None, {}), [0.5] * 5)
    assert tied.order == [0, 1, 2, 3, 4]  # ties keep the corpus order


def test_file_and_answer_metrics_of_a_hand_ranked_query(tmp_path):
    case = make_case(tmp_path, {"expected_files": ["a.py"], "answer_keywords": ["KEY"]})
    # files b, c, a: the expected file is third
    assert code_retrieval.metrics(case, ranking()) == {
        "ndcg_at_10": pytest.approx(0.5, abs=1e-6),  # 1/log2(4), ideal 1
        "mrr_at_10": pytest.approx(1 / 3, abs=1e-6),
        "recall_at_10": 1.0,
        "precision_at_1": 0.0,
        # chunks 1, 3, 2, ...: the first answer is chunk 2 (a.py, holds KEY), third; chunk 3 holds
        # KEY too, but comes from a file that is not expected
        "answer_hit_at_1": 0.0,
        "answer_hit_at_3": 1.0,
        "answer_hit_at_5": 1.0,
        "answer_mrr_at_10": pytest.approx(1 / 3, abs=1e-6),
    }


def test_two_expected_files_and_answer_lines(tmp_path):
    case = make_case(tmp_path, {"expected_files": ["a.py", "c.py"], "answer_lines": {"a.py": ["5-6"], "c.py": "2"}})
    values = code_retrieval.metrics(case, ranking())
    # files b, c, a: DCG = 1/log2(3) + 1/log2(4) = 1.1309298; IDCG = 1 + 1/log2(3) = 1.6309298
    assert values["ndcg_at_10"] == pytest.approx(1.1309298 / 1.6309298, abs=1e-6)
    assert values["mrr_at_10"] == pytest.approx(0.5)
    assert values["precision_at_1"] == 0.0
    # answers by line overlap: chunk 3 (c.py 1-3 holds line 2) is second, chunk 0 (a.py 1-10) fourth
    assert values["answer_hit_at_1"] == 0.0 and values["answer_hit_at_3"] == 1.0
    assert values["answer_mrr_at_10"] == pytest.approx(0.5)
    assert not code_retrieval.holds_answer(case, CHUNKS[2])  # a.py 11-20 misses lines 5-6


def test_the_row_shows_the_top_files_and_chunks_with_their_scores(tmp_path):
    case = make_case(tmp_path, {"expected_files": ["a.py"], "answer_keywords": ["KEY"]})
    outcome = code_retrieval.score(case, ranking())
    assert outcome.score == pytest.approx(0.5, abs=1e-6)
    details = outcome.to_json()
    assert details["top_files"][0] == {"file": "b.py", "score": 0.9, "expected": False}
    assert details["top_chunks"][2] == {"file": "a.py", "lines": "11-20", "score": 0.5, "answer": True}
    assert details["query_type"] == "doc" and details["difficulty"] == "hard"
    assert set(details["metrics"]) == {
        "ndcg_at_10",
        "mrr_at_10",
        "recall_at_10",
        "precision_at_1",
        "answer_hit_at_1",
        "answer_hit_at_3",
        "answer_hit_at_5",
        "answer_mrr_at_10",
    }


def test_expected_answers_are_validated(tmp_path):
    raw = {
        "case": "bad",
        "input": {"corpus": {"path": "."}, "chunking": {"line": {"strategy": "line"}}, "query": "q"},
        "expected": {"expected_files": ["a.py"]},
    }
    _, problem = expand_case("code_retrieval", raw, "f.yaml")
    assert problem is not None and "give answer_keywords or answer_lines" in problem.message
    raw["expected"] = {"expected_files": ["a.py"], "answer_lines": {"b.py": ["1-2"]}}
    _, problem = expand_case("code_retrieval", raw, "f.yaml")
    assert problem is not None and "answer_lines names b.py, which is not in expected_files" in problem.message
    raw["expected"] = {"expected_files": ["a.py"], "answer_lines": {"a.py": ["9-2"]}}
    _, problem = expand_case("code_retrieval", raw, "f.yaml")
    assert problem is not None and "line range '9-2'" in problem.message


def test_an_expected_file_missing_from_the_corpus_is_a_problem_at_collection(tmp_path):
    write(tmp_path / "a.py", "KEY = 1\n")
    raw = {
        "case": "lost",
        "input": {"corpus": {"path": "."}, "chunking": {"semantic": {"strategy": "semantic"}}, "query": "q"},
        "expected": {"expected_files": ["gone.py", "a.py", "b/c.py"], "answer_keywords": ["KEY"]},
    }
    cases, problem = expand_case("code_retrieval", raw, "f.yaml", directory=tmp_path)
    assert cases == [] and problem is not None
    # every missing file at once
    assert problem.line() == (
        "f.yaml: case 'lost': expected file gone.py is not in the corpus (path .); "
        "expected file b/c.py is not in the corpus (path .)"
    )
    # a file that disappears after collection is still one line when a later run searches
    raw["expected"]["expected_files"] = ["a.py"]
    case = expand_case("code_retrieval", raw, "f.yaml", directory=tmp_path)[0][0]
    (tmp_path / "a.py").rename(tmp_path / "b.py")
    bm25 = BM25Retriever(ModelSpec(id="bm25", kind="retriever", builtin="bm25"))
    with (
        start_run(tmp_path),
        pytest.raises(CaseInputError, match=r"^case 'lost': expected file a.py is not in the corpus \(path \.\)$"),
    ):
        code_retrieval.search(bm25, case)


def test_search_chunks_and_indexes_a_corpus_once_per_model_and_strategy(tmp_path):
    write(tmp_path / "a.py", "def alpha():\n    return KEY\n")
    write(tmp_path / "b.py", "def beta():\n    return 2\n")
    case = make_case(tmp_path, {"expected_files": ["a.py"], "answer_keywords": ["KEY"]})

    class Counting(DenseWords):  # rows kept through the embedding cache, as an embedder's are
        encoded = 0

        def embed(self, texts):
            Counting.encoded += len(texts)
            return super().embed(texts)

    spec = ModelSpec(id="bow", kind="embedder", builtin="bow")
    uncached = bag_of_words(spec, provider=Counting())
    for _ in range(3):
        ranked = code_retrieval.search(uncached, case)
    assert ranked.files[0][0] == "a.py"
    assert Counting.encoded == 2 + 3  # the two chunks once per process; the query each time
    cache = EmbeddingCache(tmp_path / "cache")
    for expected in (2 + 1, 0):  # a new process (a new model) with the cache, then another one
        Counting.encoded = 0
        model = bag_of_words(spec, cache, Counting())
        for _ in range(3):
            code_retrieval.search(model, case)
        assert Counting.encoded == expected


# --- the shipped cases -------------------------------------------------------------------------


def shipped_cases() -> list:
    document = yaml.safe_load(DATA_FILE.read_text())
    cases = []
    for raw in document["code_retrieval"]:
        expanded, problem = expand_case("code_retrieval", raw, DATA_FILE.name, directory=DATA_FILE.parent)
        assert problem is None, problem.line()
        cases.append(expanded)
    return cases


def test_the_shipped_cases_are_at_least_40_mixed_queries_in_three_chunkings():
    cases = shipped_cases()
    assert len(cases) >= 40
    assert all([c.variant for c in variants] == ["line", "semantic", "bounded"] for variants in cases)
    firsts = [variants[0] for variants in cases]
    kinds = [c.input.query_type for c in firsts]
    assert kinds.count("code") >= 15 and kinds.count("doc") >= 15
    levels = [c.input.difficulty for c in firsts]
    assert all(levels.count(level) >= 8 for level in ("easy", "medium", "hard"))
    assert sum(len(c.expected.expected_files) > 1 for c in firsts) >= 2
    assert sum(bool(c.expected.answer_lines) for c in firsts) >= 3


def test_every_expected_file_is_in_the_shipped_corpus_and_holds_the_answer():
    for variants in shipped_cases():
        case = variants[0]
        corpus = code_retrieval.corpus_of(case)
        texts = {}
        for path in case.expected.expected_files:
            source = corpus.file(path)
            assert source is not None, f"{case.name}: {path} is not in the corpus"
            texts[path] = source.text
        for keyword in case.expected.answer_keywords:
            assert any(keyword in text for text in texts.values()), f"{case.name}: keyword {keyword!r} not found"
        for path, spans in case.expected.answer_lines.items():
            lines = texts[path].split("\n")
            for start, end in spans:
                assert end <= len(lines), f"{case.name}: {path} has no line {end}"
                held = "\n".join(lines[start - 1 : end])
                assert any(k in held for k in case.expected.answer_keywords), f"{case.name}: {path}:{start}-{end}"


def test_the_shipped_corpus_stays_small_enough_to_embed_quickly():
    case = shipped_cases()[0][0]
    corpus = code_retrieval.corpus_of(case)
    for variant in shipped_cases()[0]:
        assert len(code_retrieval.chunks_of(corpus, variant.input.chunking)) < 600


# --- the leaderboard's metric table ------------------------------------------------------------


def metric_row(model: str, variant: str, ndcg: float, hit: float, version: int = 1, case: str = "q") -> Row:
    return Row.model_validate(
        {
            "key": f"{model}-{variant}-{case}-{version}",
            "family": "code_retrieval",
            "test": "test_code_retrieval",
            "model": model,
            "case": case,
            "item": f"{case}:{variant}",
            "variant": variant,
            "status": "ok",
            "scoring_version": version,
            "iterations": [{"score": ndcg, "metrics": {"ndcg_at_10": ndcg, "answer_hit_at_1": hit}}],
        }
    )


def test_every_metric_is_summarised_per_model_and_variant_with_an_interval(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path))
    rows = [
        metric_row("m", "line", 1.0, 1.0, case="a"),
        metric_row("m", "line", 0.5, 0.0, case="b"),
        metric_row("m", "line", 0.0, 0.0, case="c"),
        metric_row("m", "semantic", 1.0, 1.0, case="a"),
        metric_row("m", "semantic", 0.2, 1.0, version=0, case="b"),  # an older scoring version: left out
        Row.model_validate(
            {
                **metric_row("m", "line", 0, 0, case="d").to_json(),
                "status": "error",
                "iterations": [{"error": "x"}],
            }
        ),
    ]
    (table,) = aggregate({"code_retrieval": rows}, all_families()).families
    lines = table.metrics_by_variant
    assert [(line.model, line.variant, line.n) for line in lines] == [("m", "line", 3), ("m", "semantic", 1)]
    ndcg = lines[0].values["ndcg_at_10"]
    assert ndcg.mean == pytest.approx(0.5) and 0.0 <= ndcg.low <= ndcg.mean <= ndcg.high <= 1.0
    # one value of an undeclared type has no interval: a 1.0 could be a perfect nDCG
    assert lines[0].values["answer_hit_at_1"].method == "Wilson"
    assert (lines[1].values["ndcg_at_10"].low, lines[1].values["ndcg_at_10"].high) == (None, None)
    text = metric_tables(table)
    assert text[1] == "code_retrieval: every metric per variant, mean [95% CI]"
    assert "answer_hit_at_1" in text[2] and "ndcg_at_10" in text[2]


# --- end to end --------------------------------------------------------------------------------

TINY_CORPUS = {
    "geo/point.py": '''
        """Points on a plane."""
        import math


        class Point:
            def __init__(self, x, y):
                self.x, self.y = x, y

            def norm(self):
                """The distance from the origin."""
                return math.hypot(self.x, self.y)
        ''',
    "web/slug.js": """
        // Turns a title into a URL slug.
        function slugify(title) {
          return title.toLowerCase().replace(/[^a-z0-9]+/g, "-");
        }
        """,
    "docs/guide.md": """
        # Guide

        ## Installing

        Run pip install geo to install the package.

        ## Testing

        Run the tests with pytest.
        """,
}

TINY_CASES = """
_shared:
  corpus: &tiny {path: tiny, include: ["**/*.py", "**/*.js", "**/*.md"]}
  chunking: &chunking
    line: {strategy: line, lines: 6, overlap: 2}
    semantic: {strategy: semantic, lines: 6, overlap: 2}
    bounded: {strategy: bounded, max_chars: 120}
code_retrieval:
  - case: distance
    input: {corpus: *tiny, chunking: *chunking, query: "distance of a point from the origin"}
    expected: {expected_files: [geo/point.py], answer_keywords: [hypot]}
  - case: slug
    input: {corpus: *tiny, chunking: *chunking, query: "make a URL slug from a title", query_type: code}
    expected: {expected_files: [web/slug.js], answer_lines: {web/slug.js: ["2-4"]}}
  - case: install
    input: {corpus: *tiny, chunking: *chunking, query: "how do I install the package", query_type: doc}
    expected: {expected_files: [docs/guide.md], answer_keywords: [pip install]}
"""

BROKEN_CASES = """
code_retrieval:
  - case: gone
    input: {corpus: {path: nowhere}, chunking: {line: {strategy: line}}, query: "anything"}
    expected: {expected_files: [a.py], answer_keywords: [a]}
  - case: wrong_file
    input: {corpus: {path: tiny}, chunking: {line: {strategy: line}}, query: "anything"}
    expected: {expected_files: [geo/missing.py], answer_keywords: [a]}
"""

MODELS = "models:\n  - {id: bm25, kind: retriever, builtin: bm25}\n  - {id: bow, kind: embedder, builtin: bow}\n"
ITEMS = 3 * 3 * 2  # cases x chunkings x models


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write(pytester.path / "benchmark" / "models.yaml", MODELS)
    shutil.copy(REPO / "benchmark" / "test_code_retrieval.py", pytester.path / "benchmark" / "test_code_retrieval.py")
    data = pytester.path / "benchmark" / "data"
    write(data / "code_retrieval_data.yaml", TINY_CASES)
    for name, text in TINY_CORPUS.items():
        write(data / "tiny" / name, textwrap.dedent(text).lstrip("\n"))
    return pytester


def stored(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / "benchmark" / "results" / "code_retrieval.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_tiny_corpus_runs_end_to_end_and_prints_every_metric(project):
    result = project.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=ITEMS)
    rows = stored(project)
    assert len(rows) == ITEMS and all(r["status"] == "ok" for r in rows)
    by_item = {(r["model"], r["item"]): r["iterations"][0] for r in rows}
    distance = by_item[("bm25", "distance:semantic")]
    assert distance["top_files"][0]["file"] == "geo/point.py"
    assert distance["metrics"]["ndcg_at_10"] == 1.0 and distance["score"] == 1.0
    assert distance["top_chunks"][0]["context"] == "class Point > def norm"
    assert by_item[("bm25", "install:semantic")]["top_chunks"][0]["context"] == "Guide > Installing"
    assert by_item[("bm25", "slug:line")]["metrics"]["answer_hit_at_1"] == 1.0
    result.stdout.fnmatch_lines(
        [
            "*ragmatrix leaderboard*",
            "code_retrieval: file nDCG@10, scale 0..1, higher is better (3 cases, 18 items)",
            "not ranked: too few cases to tell any two models apart*",  # three cases
            "*-*bm25*1.000*9*9*3*0*0*",
            "code_retrieval: every metric per variant, mean [[]95% CI[]], part 1 of 2",
            "model*variant*items*answer_hit_at_1*answer_hit_at_3*answer_hit_at_5*answer_mrr_at_10",
            "bm25*bounded*3*",
            "code_retrieval: every metric per variant, mean [[]95% CI[]], part 2 of 2",
            "model*variant*items*mrr_at_10*ndcg_at_10*precision_at_1*recall_at_10",
        ]
    )


def test_a_cached_rerun_imports_no_parser_and_a_changed_corpus_reruns(project):
    project.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=ITEMS)
    script = (
        "import sys, pytest\n"
        "code = pytest.main(['benchmark', '-q', '-p', 'no:cacheprovider'])\n"
        "names = ('tree_sitter', 'tree_sitter_language_pack', 'bm25s', 'scipy', 'torch')\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print('HEAVY', heavy, 'CODE', int(code))\n"
    )
    result = project.run(sys.executable, "-c", script)
    result.stdout.fnmatch_lines(["*18 cached*", "HEAVY [[][]] CODE 0"])
    write(project.path / "benchmark" / "data" / "tiny" / "web" / "slug.js", "function slugify(t) { return t; }\n")
    project.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=ITEMS)


def test_a_missing_corpus_is_an_error_row_and_a_missing_expected_file_a_problem_line(project):
    write(project.path / "benchmark" / "data" / "code_retrieval_data.yaml", BROKEN_CASES)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "bm25")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*case 'wrong_file': expected file geo/missing.py is not in the corpus (path tiny)"])
    for _ in range(2):  # the problem stays a problem: no error row, nothing to rerun
        result = project.runpytest(
            "benchmark", "-p", "no:cacheprovider", "-k", "bm25", "--continue-on-collection-errors"
        )
        result.assert_outcomes(failed=1, errors=1)
        result.stdout.fnmatch_lines(["*error in 1 of 1 iteration(s): case 'gone': corpus path nowhere not found"])
    assert "Traceback" not in result.stdout.str()
    rows = stored(project)
    assert {r["case"] for r in rows} == {"gone"} and {r["status"] for r in rows} == {"error"}


def test_a_dangling_link_is_not_a_corpus_file(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.py").write_text("def a():\n    return 1\n")
    os.symlink(tmp_path / "repo" / "gone.py", tmp_path / "repo" / "b.py")  # points nowhere
    corpus = load_corpus(CorpusSpec(path="repo", include=["*.py"]), tmp_path)
    assert [f.path for f in corpus.files] == ["a.py"]


OTHER_CORPUS_CASE = """
code_retrieval:
  - case: elsewhere
    input: {corpus: {path: other}, chunking: {line: {strategy: line}}, query: "anything"}
    expected: {expected_files: [a.py], answer_keywords: [a]}
"""


def test_a_file_name_that_is_not_utf8_is_one_line_and_every_other_case_runs(project):
    other = project.path / "benchmark" / "data" / "other"
    write(other / "a.py", "def a():\n    return 1\n")
    with open(os.fsencode(other) + b"/caf\xe9.py", "w") as handle:  # Latin-1, as an old archive may hold
        handle.write("x = 1\n")
    write(project.path / "benchmark" / "data" / "other_data.yaml", OTHER_CORPUS_CASE)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "bm25")
    result.assert_outcomes(passed=ITEMS // 2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "error in 1 of 1 iteration(s): case 'elsewhere': corpus path other: the file name caf\\xe9.py is not"
            " UTF-8; rename it, or leave it out with exclude"
        ]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read any file")
def test_an_unreadable_corpus_file_is_one_line(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.py").write_text("x = 1\n")
    (tmp_path / "repo" / "a.py").chmod(0)
    with pytest.raises(CaseInputError, match=r"^corpus .*: cannot read a.py: Permission denied$"):
        load_corpus(CorpusSpec(path="repo", include=["*.py"]), tmp_path)


# --- one listing per session, and chunk sizes in every row -------------------------------------

MANY_GLOBS = [
    f"**/*.{ext}" for ext in "py js md rs go java c h ts tsx toml yaml yml json txt rst cfg ini sh css html".split()
]


class Listings:
    """Counts the folders a run walked, as the run ends."""

    def __init__(self) -> None:
        self.count = 0

    def pytest_sessionfinish(self) -> None:
        self.count = corpora().listings


def test_a_corpus_is_listed_once_per_run_whatever_its_globs_and_items(project):
    globs = ", ".join(f'"{g}"' for g in MANY_GLOBS)
    data = project.path / "benchmark" / "data" / "code_retrieval_data.yaml"
    data.write_text(TINY_CASES.replace('include: ["**/*.py", "**/*.js", "**/*.md"]', f"include: [{globs}]"))
    for _ in range(2):  # a cold run, then a cached one: each lists the corpus once
        listings = Listings()
        result = project.runpytest("benchmark", "-p", "no:cacheprovider", plugins=[listings])
        assert listings.count == 1
    assert_outcomes(result, cached=ITEMS)


def test_a_runs_corpora_are_read_once_and_the_next_run_reads_them_again(tmp_path):
    from ragmatrix.families.code_retrieval.corpus import session_corpus

    write(tmp_path / "a.py", "A = 1\n")
    spec = CorpusSpec(path=".", include=MANY_GLOBS)
    with start_run(tmp_path):
        first = session_corpus(spec, tmp_path)
        write(tmp_path / "b.py", "B = 1\n")
        assert session_corpus(spec, tmp_path) is first and corpora().listings == 1
    with start_run(tmp_path):  # a new run shares nothing with the one before
        assert session_corpus(spec, tmp_path).paths == {"a.py", "b.py"} and corpora().listings == 1


def test_the_index_reports_chunk_sizes_against_the_cap_and_the_models_limit(tmp_path):
    write(tmp_path / "a.py", "def alpha():\n    return 1\n\n\ndef beta():\n    " + "x = 1; " * 200 + "\n")

    class Counted(HashingBagOfWords):
        def context_limit(self):
            return 50

        def token_counts(self, texts):
            return [len(t.split()) for t in texts]

    model = bag_of_words(provider=Counted())
    corpus = code_retrieval.corpus_of(make_case(tmp_path, {"expected_files": ["a.py"], "answer_keywords": ["x"]}))
    stats = code_retrieval.index_of(model, corpus, code_retrieval.Chunking(strategy="semantic", max_chars=300)).stats
    assert stats["max_chars"] == 300 and stats["longest_chunk_chars"] <= 300 and stats["chunks"] >= 3
    assert stats["token_limit"] == 50 and stats["chunks_over_limit"] >= 1
    assert stats["median_chunk_tokens"] <= stats["p95_chunk_tokens"] <= stats["longest_chunk_tokens"]


def test_every_schema_error_of_a_case_is_on_its_one_line(tmp_path):
    raw = {
        "case": "sloppy",
        "input": {
            "corpus": {"path": "."},
            "chunking": {"line": {"strategy": "line"}},
            "query": "q",
            "query_type": "tests",
            "difficulty": "trivial",
        },
        "expected": {"expected_files": []},
    }
    _, problem = expand_case("code_retrieval", raw, "f.yaml", directory=tmp_path)
    assert problem is not None
    message = problem.message
    assert message.count(";") >= 2
    assert "input.query_type" in message and "input.difficulty" in message and "expected.expected_files" in message

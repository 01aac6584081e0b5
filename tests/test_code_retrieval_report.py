"""Code retrieval's own part of the leaderboard: the Rust tool's answer metrics (hand-computed),
what each model read of its chunks, and both tables in the terminal and the report."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from ragmatrix.families import all_families
from ragmatrix.families.code_retrieval import report, rust_tool
from ragmatrix.families.code_retrieval.chunking import Chunk
from ragmatrix.families.code_retrieval.retrieval import token_stats
from ragmatrix.families.code_retrieval.schema import AnswerRegion, CodeExpected
from ragmatrix.report.aggregate import aggregate
from ragmatrix.report.content import Context, Plots, build
from ragmatrix.report.document import markdown
from ragmatrix.report.terminal import render
from ragmatrix.results.rows import Row


def case(**expected: Any) -> Any:
    return SimpleNamespace(expected=CodeExpected(expected_files=["src/matcher.rs"], **expected))


CHUNKS = [
    Chunk("src/lib.rs", 1, 2, "pub use matcher::RegexMatcher;"),  # the keyword, in a file not expected
    Chunk("src/matcher.rs", 3, 6, "fn build() -> Builder {"),
    Chunk("src/matcher.rs", 8, 12, "pub struct RegexMatcher {"),
    Chunk("README.md", 1, 5, "# minigrep"),
    Chunk("src/json.rs", 1, 9, "impl RegexMatcher for Json {"),
]


# --- the tool's answer metrics -------------------------------------------------------------------


def test_a_keyword_matches_in_any_file_as_in_the_tool():
    keyed = case(answer_keywords=["RegexMatcher"])
    assert [rust_tool.holds_answer(keyed, c) for c in CHUNKS] == [True, False, True, False, True]
    # lines stay with their file in this project's form
    lined = case(answer_lines={"src/matcher.rs": [[8, 9]]})
    assert [rust_tool.holds_answer(lined, c) for c in CHUNKS] == [False, False, True, False, False]


def test_regions_match_any_file_their_pattern_allows_and_need_every_criterion():
    regions = case(
        answer_regions=[
            AnswerRegion(keywords=["RegexMatcher"], file_pattern="matcher"),
            AnswerRegion(lines=(1, 1)),  # any file at all: the tool needs no expected file
            AnswerRegion(),  # no criteria: matches nothing
        ]
    )
    assert [rust_tool.holds_answer(regions, c) for c in CHUNKS] == [True, False, True, True, True]


def test_the_tools_answer_ndcg_divides_by_the_answers_found_in_the_top_10():
    keyed = case(answer_keywords=["pub struct RegexMatcher", "impl RegexMatcher"])
    # answers at ranks 2 and 4 (chunks 2 and 4): DCG = 1/log2(3) + 1/log2(5); the ideal DCG of
    # the two answers found = 1 + 1/log2(3)
    values = rust_tool.answer_metrics(keyed, CHUNKS, [1, 2, 3, 4, 0])
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    assert values["answer_ndcg_at_10"] == pytest.approx(dcg / (1 + 1 / math.log2(3)), abs=1e-6)  # 0.6509
    assert values["answer_hit_at_1"] == 0.0 and values["answer_hit_at_3"] == 1.0 and values["answer_hit_at_5"] == 1.0
    assert values["answer_mrr_at_10"] == pytest.approx(0.5)
    # one answer at rank 3: 1/log2(4) = 0.5, the tool's own worked example; at rank 5 it is 1/log2(6)
    one = case(answer_keywords=["pub struct RegexMatcher"])
    assert rust_tool.answer_metrics(one, CHUNKS, [0, 1, 2, 3, 4])["answer_ndcg_at_10"] == pytest.approx(0.5)
    assert rust_tool.answer_metrics(one, CHUNKS, [0, 1, 3, 4, 2])["answer_ndcg_at_10"] == pytest.approx(
        1 / math.log2(6), abs=1e-6
    )
    # only the top k counts: an answer at rank 5 is no answer in a top 4, and nothing found scores 0
    assert rust_tool.answer_metrics(one, CHUNKS, [0, 1, 3, 4, 2], k=4) == {
        "answer_ndcg_at_4": 0.0,
        "answer_hit_at_1": 0.0,
        "answer_hit_at_3": 0.0,
        "answer_hit_at_5": 0.0,
        "answer_mrr_at_4": 0.0,
    }


# --- truncation and the tables -------------------------------------------------------------------


def test_token_stats_count_the_chunks_cut_and_the_tokens_never_read():
    assert token_stats([100, 300, 256, 400], 256) == {
        "token_limit": 256,
        "chunks_over_limit": 2,
        "chunk_tokens": 1056,
        "unread_tokens": 44 + 144,
        "median_chunk_tokens": 300,
        "p95_chunk_tokens": 400,
        "longest_chunk_tokens": 400,
    }


def row(model: str, case_name: str, variant: str, score: float, index: dict[str, Any], **details: Any) -> Row:
    iteration = {"score": score, "valid": True, "metrics": {"ndcg_at_10": score}, "index": index, **details}
    return Row.model_validate(
        {
            "key": f"{model}-{case_name}-{variant}",
            "family": "code_retrieval",
            "test": "test_code_retrieval",
            "model": model,
            "case": case_name,
            "variant": variant,
            "item": f"{case_name}:{variant}",
            "scoring_version": 3,
            "status": "ok",
            "score": score,
            "iterations": [iteration],
        }
    )


LINE_INDEX = {"chunks": 200, "token_limit": 256, "chunks_over_limit": 180, "chunk_tokens": 80_000,
              "unread_tokens": 28_000}  # fmt: skip
SEMANTIC_INDEX = {"chunks": 500, "token_limit": 256, "chunks_over_limit": 10, "chunk_tokens": 70_000,
                  "unread_tokens": 700}  # fmt: skip
OTHER_CORPUS = {"chunks": 100, "token_limit": 256, "chunks_over_limit": 20, "chunk_tokens": 20_000,
                "unread_tokens": 2_000}  # fmt: skip


def tool(ndcg: float, hit1: float, hit3: float, hit5: float, mrr: float) -> dict[str, Any]:
    return {
        rust_tool.FIELD: dict(zip(rust_tool.NAMES, (ndcg, hit1, hit3, hit5, mrr), strict=True)),
    }


def rows() -> list[Row]:
    return [
        row("minilm", "q1", "line", 1.0, LINE_INDEX, query_type="code", **tool(1.0, 1.0, 1.0, 1.0, 1.0)),
        row("minilm", "q2", "line", 0.5, LINE_INDEX, query_type="doc", **tool(0.5, 0.0, 1.0, 1.0, 1 / 3)),
        row("minilm", "q3", "line", 0.0, OTHER_CORPUS, query_type="code"),  # no answer: no tool metrics
        row("minilm", "q1", "semantic", 1.0, SEMANTIC_INDEX, query_type="code", **tool(1.0, 1.0, 1.0, 1.0, 1.0)),
        row("minilm", "q2", "semantic", 1.0, SEMANTIC_INDEX, query_type="doc", **tool(1.0, 1.0, 1.0, 1.0, 1.0)),
        row("minilm", "q3", "semantic", 1.0, SEMANTIC_INDEX, query_type="code"),
        # BM25 reads every token: no limit, no truncation line
        row("bm25", "q1", "line", 1.0, {"chunks": 200}, query_type="code", **tool(1.0, 1.0, 1.0, 1.0, 1.0)),
    ]


def test_truncation_per_model_and_chunking_sums_the_distinct_corpora_and_warns():
    table = aggregate({"code_retrieval": rows()}, all_families()).families[0]
    lines = {(t.model, t.chunking): t for t in report.truncation(table)}
    assert set(lines) == {("minilm", "line"), ("minilm", "semantic")}
    line = lines[("minilm", "line")]
    # two corpora (two distinct indexes): 200 + 100 chunks, 180 + 20 cut, 30,000 of 100,000 tokens unread
    assert (line.chunks, line.cut, line.tokens, line.unread) == (300, 200, 100_000, 30_000)
    assert line.cut_share == pytest.approx(2 / 3) and line.unread_share == pytest.approx(0.3)
    assert line.warned and not lines[("minilm", "semantic")].warned  # 1% unread
    assert line.warning().startswith(
        "minilm on line chunks: 200 of 300 chunks (67%) are longer than the 256 tokens it reads, and 30% of "
        "their text is never read"
    )


def test_rows_recorded_before_tokens_were_counted_show_no_unread_share_and_no_warning():
    old = dict(LINE_INDEX)
    del old["chunk_tokens"], old["unread_tokens"]
    table = aggregate({"code_retrieval": [row("minilm", "q1", "line", 1.0, old)]}, all_families()).families[0]
    (line,) = report.truncation(table)
    assert line.unread_share is None and not line.warned and line.cut == 180


def test_the_rust_tools_table_averages_over_queries_and_over_those_with_an_answer():
    table = aggregate({"code_retrieval": rows()}, all_families()).families[0]
    lines = {(t.model, t.chunking): t for t in report.tool_lines(table)}
    line = lines[("minilm", "line")]
    assert (line.queries, line.answer_queries) == (3, 2)
    assert line.values["file"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3
    assert line.values["answer_ndcg_at_10"] == pytest.approx(0.75)  # (1 + 0.5) / 2: q3 has no answer
    assert line.values["answer_mrr_at_10"] == pytest.approx((1 + 1 / 3) / 2)
    assert line.values["code:file"] == pytest.approx(0.5) and line.values["code:answer_ndcg_at_10"] == 1.0
    assert line.values["doc:file"] == 0.5 and line.values["doc:answer_hit_at_1"] == 0.0


def test_the_terminal_and_the_report_show_both_tables_under_the_family():
    tables = aggregate({"code_retrieval": rows()}, all_families())
    text = "\n".join(render(tables, all_families()))
    assert "code_retrieval: what each model read of its chunks (cut: longer than it reads)" in text
    assert "warning: minilm on line chunks: 200 of 300 chunks (67%)" in text
    assert "code_retrieval: the Rust tool's table, as the Rust tool computes them" in text
    tool_row = next(line for line in text.splitlines() if line.startswith("minilm") and "0.750" in line)
    assert tool_row.split()[:6] == ["minilm", "line", "3", "2", "0.500", "0.750"]
    page = markdown(build(tables, Plots(), Context(results="results", families=all_families())))
    assert "### code_retrieval: what each model read of its chunks" in page
    assert "**Warning**: minilm on line chunks" in page
    assert "### code_retrieval: the Rust tool's table" in page

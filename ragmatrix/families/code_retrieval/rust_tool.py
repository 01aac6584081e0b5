"""The Rust embedding benchmark's own answer metrics, computed the way it computes them, so that
its published tables can be set beside a run of this project.

They differ from this project's answer metrics in two ways (docs/seeds/rust-embedding-benchmark.md):

- **Where an answer may be.** A region without a `file_pattern` matches a chunk of any file,
  not only of an expected file: a loose keyword (`app`, `def`) finds its answer anywhere. In
  this project's own form (`answer_keywords`, `answer_lines` per file), a keyword likewise
  matches in any file, and lines still belong to their file.
- **Answer nDCG@10.** Over the top 10 chunks, with binary gains, divided by the ideal DCG of as
  many answers as were found there (at least one), not of every answer in the corpus: one
  answer at rank 10 scores as high as at rank 1 when it is the only one found.

Hit@1, Hit@3, Hit@5 and MRR@10 follow the same matching rule. A keyword is searched in the
chunk's code: the tool searches a chunk's text after its `[file: ...]` header, which for its
own chunks is the same code. The tool averages these over the queries that have an answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragmatrix.families.code_retrieval.chunking import Chunk
from ragmatrix.families.code_retrieval.schema import CodeItem
from ragmatrix.stats.metrics import hit_at_k, mrr_at_k, ndcg_at_k

FIELD = "rust_tool"  # where a row's iterations hold them
NAMES = ("answer_ndcg_at_10", "answer_hit_at_1", "answer_hit_at_3", "answer_hit_at_5", "answer_mrr_at_10")


def holds_answer(case: CodeItem, chunk: Chunk) -> bool:
    """Whether the tool would count the chunk as holding the answer: any region matches, in any
    file its `file_pattern` allows (any file, with none)."""
    expected = case.expected
    if expected.answer_regions is not None:
        for region in expected.answer_regions:
            if not region.keywords and region.lines is None:
                continue  # a region with no criteria matches nothing
            if region.file_pattern is not None and region.file_pattern not in chunk.path:
                continue
            if region.keywords and not any(keyword in chunk.body for keyword in region.keywords):
                continue
            if region.lines is None or chunk.overlaps(*region.lines):
                return True
        return False
    if any(keyword in chunk.body for keyword in expected.answer_keywords):
        return True
    return any(
        chunk.overlaps(start, end)
        for name, spans in expected.answer_lines.items()
        if chunk.path == name or chunk.path.endswith("/" + name)
        for start, end in spans
    )


def answer_metrics(case: CodeItem, chunks: Sequence[Chunk], order: Sequence[int], k: int = 10) -> dict[str, float]:
    """The tool's answer metrics of one query, from the chunks ranked best first."""
    top = list(order[:k])
    found = {i: 1.0 for i in top if holds_answer(case, chunks[i])}
    values = {
        # the ideal DCG of the answers found in the top k, as the tool divides
        f"answer_ndcg_at_{k}": ndcg_at_k(top, found, k),
        "answer_hit_at_1": hit_at_k(top, found, 1),
        "answer_hit_at_3": hit_at_k(top, found, 3),
        "answer_hit_at_5": hit_at_k(top, found, 5),
        f"answer_mrr_at_{k}": mrr_at_k(top, found, k),
    }
    return {name: round(value, 6) for name, value in values.items()}

"""Code retrieval: rank a real codebase's chunks for a question, then score files and answers.

A case is one query against a corpus (see `code_corpus`), with a chunking strategy per variant
(see `chunking`). The corpus is chunked once per (chunking, corpus fingerprint) and indexed
once per (model, chunking, corpus fingerprint) in each process; an embedder's chunk vectors
also go through the embedding cache, so a corpus is embedded once per model, ever.

Scores (names after MTEB and ranx, all in 0..1):

- file level: a file's score is the best score of its chunks, and a file is relevant when it
  is in `expected_files`: `ndcg_at_10` (the item's score), `mrr_at_10`, `recall_at_10`,
  `precision_at_1`;
- answer level: a chunk holds the answer when it comes from an expected file and its code
  contains one of `answer_keywords` (case-sensitive) or overlaps `answer_lines`:
  `answer_hit_at_1`, `answer_hit_at_3`, `answer_hit_at_5`, `answer_mrr_at_10`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from plugin.case import CaseInputError
from plugin.families.code_retrieval.chunking import Chunk, Chunking, chunk_corpus
from plugin.families.code_retrieval.corpus import Corpus, CorpusSpec, load_corpus
from plugin.keys import canonical_json
from plugin.outcome import Outcome
from plugin.stats.metrics import hit_at_k, mrr_at_k, ndcg_at_k, precision_at_k, recall_at_k

if TYPE_CHECKING:
    import numpy as np

# Bump when scoring, chunking or the BM25 tokenizer changes: stored results are then recomputed.
SCORING_VERSION = 1
TOP_K = 10  # ranked files and chunks kept in each row, and the k of the @10 metrics


class CodeQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    corpus: CorpusSpec
    chunking: Chunking  # a dict of named strategies in the YAML: one variant each
    query: str = Field(min_length=1)
    query_type: Literal["code", "doc"] = "code"  # asks for code, or for what its docs say
    difficulty: Literal["easy", "medium", "hard"] = "medium"


_SPAN = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_span(value: object) -> tuple[int, int]:
    """`"120-140"` or `120` as a 1-based inclusive line range."""
    match = _SPAN.match(str(value)) if isinstance(value, int | str) and not isinstance(value, bool) else None
    if match is None:
        raise ValueError(f"line range {value!r}: write it as 'start-end' or one line number")
    start = int(match.group(1))
    end = int(match.group(2) or start)
    if start < 1 or end < start:
        raise ValueError(f"line range {value!r}: lines start at 1 and the end comes after the start")
    return start, end


class CodeExpected(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expected_files: list[str] = Field(min_length=1)  # relative to the corpus root
    answer_keywords: list[str] = Field(default_factory=list)  # case-sensitive
    answer_lines: dict[str, list[tuple[int, int]]] = Field(default_factory=dict)  # file -> line ranges

    @field_validator("answer_lines", mode="before")
    @classmethod
    def spans(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {
            path: [parse_span(s) for s in (spans if isinstance(spans, list) else [spans])]
            for path, spans in value.items()
        }

    @model_validator(mode="after")
    def answer_named(self) -> CodeExpected:
        if not self.answer_keywords and not self.answer_lines:
            raise ValueError("give answer_keywords or answer_lines (or both)")
        stray = [path for path in self.answer_lines if path not in self.expected_files]
        if stray:
            raise ValueError(f"answer_lines names {stray[0]}, which is not in expected_files")
        return self


class CodeRetrievalCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: CodeQuery
    expected: CodeExpected


# --- the corpus and its index, once per process --------------------------------------------------


def corpus_of(case: Any) -> Corpus:
    """The case's corpus; a missing path, package or file is one line naming the case."""
    try:
        return load_corpus(case.input.corpus, case.directory)
    except CaseInputError as error:
        raise CaseInputError(f"case '{case.name}': {error}") from None


def corpus_fingerprint(case: Any) -> str:
    """The md5 of the corpus files' relative paths and contents: part of the result key."""
    return corpus_of(case).fingerprint


@dataclass(frozen=True)
class Index:
    chunks: list[Chunk]
    scorer: Any  # model.index_documents(texts): .score(queries) -> queries x chunks
    stats: dict[str, Any]
    model: Any = None  # kept alive with its index, so that its id stays its own


_chunk_lists: dict[tuple[str, str], list[Chunk]] = {}
_indexes: dict[tuple[int, str, str], Index] = {}
MEMO_SIZE = 32


def chunks_of(corpus: Corpus, chunking: Chunking) -> list[Chunk]:
    """The corpus's chunks under one strategy, cut once per process."""
    key = (canonical_json(chunking.model_dump()), corpus.fingerprint)
    if key not in _chunk_lists:
        if len(_chunk_lists) >= MEMO_SIZE:
            _chunk_lists.clear()
        _chunk_lists[key] = chunk_corpus(corpus, chunking)
    return _chunk_lists[key]


def index_of(model: Any, corpus: Corpus, chunking: Chunking) -> Index:
    """The chunks indexed by the model (embedded, for an embedder) once per process. The index
    scores queries through the model it was built with, so it is kept per model object."""
    key = (id(model), canonical_json(chunking.model_dump()), corpus.fingerprint)
    if key not in _indexes:
        chunks = chunks_of(corpus, chunking)
        texts = [chunk.text for chunk in chunks]
        scorer = model.index_documents(texts)
        if len(_indexes) >= MEMO_SIZE:
            _indexes.clear()
        _indexes[key] = Index(chunks, scorer, _stats(model, chunks, texts), model)
    return _indexes[key]


def _stats(model: Any, chunks: list[Chunk], texts: list[str]) -> dict[str, Any]:
    """How many chunks, the longest one's code, and how many the model would truncate."""
    stats: dict[str, Any] = {
        "chunks": len(chunks),
        "longest_chunk_chars": max((len("".join(c.body.split())) for c in chunks), default=0),
    }
    limit = getattr(model, "context_limit", None)
    counting = getattr(model, "token_counts", None)
    counts = counting(texts) if limit and counting is not None else None
    if counts is not None:
        stats["chunks_over_limit"] = sum(1 for n in counts if n > limit)
        stats["token_limit"] = limit
    return stats


# --- ranking -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranking:
    chunks: list[Chunk]  # every chunk of the corpus
    scores: list[float]  # per chunk
    order: list[int]  # chunk indices, best first
    files: list[tuple[str, float]]  # files best first, each scored by its best chunk
    stats: dict[str, Any]


def search(model: Any, case: Any) -> Ranking:
    """Rank every chunk of the case's corpus for its query."""
    corpus = corpus_of(case)
    missing = [p for p in case.expected.expected_files if p not in corpus.paths]
    if missing:
        raise CaseInputError(f"case '{case.name}': expected file {missing[0]} is not in the corpus ({corpus.label})")
    index = index_of(model, corpus, case.input.chunking)
    if not index.chunks:
        raise CaseInputError(f"case '{case.name}': the corpus ({corpus.label}) gives no chunks")
    return rank(index, index.scorer.score([case.input.query])[0])


def rank(index: Index, scores: np.ndarray | list[float]) -> Ranking:
    """Chunks by score, best first (ties in corpus order), and files by their best chunk."""
    values = [float(x) for x in scores]
    order = sorted(range(len(values)), key=lambda i: -values[i])
    files: list[tuple[str, float]] = []
    seen: set[str] = set()
    for i in order:
        path = index.chunks[i].path
        if path not in seen:
            seen.add(path)
            files.append((path, values[i]))
    return Ranking(index.chunks, values, order, files, index.stats)


# --- scoring -----------------------------------------------------------------------------------


def holds_answer(case: Any, chunk: Chunk) -> bool:
    """From an expected file, and its code has a keyword or overlaps the answer lines."""
    expected: CodeExpected = case.expected
    if chunk.path not in expected.expected_files:
        return False
    if any(keyword in chunk.body for keyword in expected.answer_keywords):
        return True
    return any(chunk.overlaps(start, end) for start, end in expected.answer_lines.get(chunk.path, []))


def metrics(case: Any, ranking: Ranking, k: int = TOP_K) -> dict[str, float]:
    relevant_files = {path: 1.0 for path in case.expected.expected_files}
    files = [path for path, _ in ranking.files]
    top = ranking.order[:k]
    answers = {i: 1.0 for i in top if holds_answer(case, ranking.chunks[i])}
    values = {
        f"ndcg_at_{k}": ndcg_at_k(files, relevant_files, k),
        f"mrr_at_{k}": mrr_at_k(files, relevant_files, k),
        f"recall_at_{k}": recall_at_k(files, relevant_files, k),
        "precision_at_1": precision_at_k(files, relevant_files, 1),
        "answer_hit_at_1": hit_at_k(top, answers, 1),
        "answer_hit_at_3": hit_at_k(top, answers, 3),
        "answer_hit_at_5": hit_at_k(top, answers, 5),
        f"answer_mrr_at_{k}": mrr_at_k(top, answers, k),
    }
    return {name: round(value, 6) for name, value in values.items()}


def score(case: Any, ranking: Ranking) -> Outcome:
    """File-level nDCG@10 is the score; every metric, and the top files and chunks with their
    scores, go into the details, so a failed query can be read off its row."""
    values = metrics(case, ranking)
    expected = set(case.expected.expected_files)
    top_files = [
        {"file": path, "score": round(value, 4), "expected": path in expected} for path, value in ranking.files[:TOP_K]
    ]
    top_chunks = []
    for i in ranking.order[:TOP_K]:
        chunk = ranking.chunks[i]
        entry: dict[str, Any] = {
            "file": chunk.path,
            "lines": f"{chunk.start}-{chunk.end}",
            "score": round(ranking.scores[i], 4),
            "answer": holds_answer(case, chunk),
        }
        if chunk.context:
            entry["context"] = chunk.context
        top_chunks.append(entry)
    return Outcome(
        score=values[f"ndcg_at_{TOP_K}"],
        metrics=values,
        query_type=case.input.query_type,
        difficulty=case.input.difficulty,
        top_files=top_files,
        top_chunks=top_chunks,
        index=ranking.stats,
    )

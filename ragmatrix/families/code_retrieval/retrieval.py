"""Code retrieval: rank a real codebase's chunks for a question, then score files and answers.

A case is one query against a corpus (see `code_corpus`), with a chunking strategy per variant
(see `chunking`). The corpus is chunked once per (chunking, corpus fingerprint) and indexed
once per (model, chunking, corpus fingerprint) in each run (`ragmatrix.foundations.context`); an embedder's
chunk vectors also go through the embedding cache, so a corpus is embedded once per model, ever.

Scores (names after MTEB and ranx, all in 0..1):

- file level: a file's score is the best score of its chunks, and a file is relevant when it
  is in `expected_files`: `ndcg_at_10` (the item's score), `mrr_at_10`, `recall_at_10`,
  `precision_at_1`;
- answer level: a chunk holds the answer when it comes from an expected file and its code
  contains one of `answer_keywords` (case-sensitive) or overlaps `answer_lines`, or when it
  matches one of `answer_regions` (the Rust embedding benchmark's form, see `AnswerRegion`):
  `answer_hit_at_1`, `answer_hit_at_3`, `answer_hit_at_5`, `answer_mrr_at_10`. A case with
  `answer_regions: []` has no answer ground truth, and its rows leave these out;
- beside them, under `rust_tool`, the Rust embedding benchmark's own answer metrics, computed
  as it computes them (`rust_tool`), to set beside its published tables;
- the index: chunk sizes against the cap, and against the tokens the model reads (`_stats`).

Expected files may be named by a unique suffix of their path. With `search: by_type`, a code
query ranks only code files and a doc query only documentation (`DOC_EXTENSIONS`), as that tool
does. The corpus, the expected files and the query type are checked at collection (`check`), so a
case that names a file the corpus lacks is a problem line, not an error row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ragmatrix.families.code_retrieval import rust_tool
from ragmatrix.families.code_retrieval.chunking import Chunk, Chunking, chunk_corpus
from ragmatrix.families.code_retrieval.corpus import Corpus, session_corpus
from ragmatrix.families.code_retrieval.schema import UNSPECIFIED, AnswerRegion, CodeItem
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.foundations.keys import canonical_json
from ragmatrix.models.progress import note
from ragmatrix.seam.case import CaseInputError
from ragmatrix.seam.outcome import Outcome
from ragmatrix.stats.metrics import hit_at_k, mrr_at_k, ranking_metrics

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.protocols import DocumentIndex, Model, Reranker, Retriever
    from ragmatrix.models.two_stage import Reordered

# Bump when scoring, chunking or the BM25 tokenizer changes: stored results are then recomputed.
# 2: semantic chunks capped (SEMANTIC_CAP), expected files by suffix, answer regions.
# 3: rows carry the Rust tool's answer metrics and the tokens a model never read; a missing
#    query type or difficulty is "unspecified"; C, C++, Ruby, PHP, Swift, Kotlin, Scala, TOML,
#    JSON and YAML are parsed (Python's chunks are unchanged).
SCORING_VERSION = 3
TOP_K = 10  # ranked files and chunks kept in each row, and the k of the @10 metrics
# Files a doc query ranks under `search: by_type` (the Rust embedding benchmark's list, and
# .markdown); every other file is code.
DOC_EXTENSIONS = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc"})


def is_doc(path: str) -> bool:
    dot = path.rfind(".")
    return dot > path.rfind("/") and path[dot:].lower() in DOC_EXTENSIONS


# --- the corpus and its index, once per run -----------------------------------------------------


def corpus_of(case: CodeItem) -> Corpus:
    """The case's corpus, listed once per run; a missing path, package or file is one line
    naming the case."""
    try:
        return session_corpus(case.input.corpus, case.directory)
    except CaseInputError as error:
        raise CaseInputError(f"case '{case.name}': {error}") from None


def corpus_fingerprint(case: CodeItem) -> str:
    """The md5 of the corpus files' relative paths and contents: part of the result key."""
    return corpus_of(case).fingerprint


def resolve_expected(case: CodeItem, corpus: Corpus) -> tuple[dict[str, str], list[str]]:
    """Each expected file's path in the corpus (names may be unique suffixes), and a line for
    each name that is missing, ambiguous, or of the wrong type for a `by_type` search."""
    return resolve_files(case.expected.expected_files, corpus, case.input.search, case.input.query_type)


def resolve_files(names: list[str], corpus: Corpus, search: str, query_type: str) -> tuple[dict[str, str], list[str]]:
    """`resolve_expected` for a query not yet a case (one of a query file)."""
    resolved: dict[str, str] = {}
    problems: list[str] = []
    for name in names:
        path, why = corpus.resolve(name)
        if path is None:
            problems.append(str(why))
            continue
        resolved[name] = path
        if search == "by_type" and is_doc(path) != (query_type == "doc"):
            kind = "documentation" if is_doc(path) else "code"
            ranked = "documentation" if query_type == "doc" else "code"
            problems.append(
                f"expected file {path} is {kind}, but a {query_type} query with search: by_type ranks {ranked} only"
            )
    return resolved, problems


def check(case: CodeItem) -> list[str]:
    """Problems of a case that show at collection: its expected files against its corpus. A
    corpus that cannot be read is left to the run, which records it as the item's error."""
    try:
        corpus = corpus_of(case)
    except CaseInputError:
        return []
    return resolve_expected(case, corpus)[1]


@dataclass(frozen=True)
class Index:
    chunks: list[Chunk]
    scorer: DocumentIndex  # model.index_documents(texts): .score(queries) -> queries x chunks
    stats: dict[str, Any]
    model: Retriever | None = None  # kept alive with its index, so that its id stays its own

    @cached_property
    def file_ids(self) -> tuple[list[str], np.ndarray]:
        """The distinct files in corpus order, and each chunk's position among them."""
        import numpy as np

        names: dict[str, int] = {}
        ids = [names.setdefault(chunk.path, len(names)) for chunk in self.chunks]
        return list(names), np.asarray(ids, dtype=np.int64)

    @cached_property
    def doc_chunks(self) -> np.ndarray:
        """Whether each chunk comes from documentation (for `search: by_type`)."""
        import numpy as np

        return np.asarray([is_doc(chunk.path) for chunk in self.chunks], dtype=bool)


MEMO_SIZE = 32


class Indexes:
    """A run's chunks, by (chunking, corpus fingerprint), and indexes, by (model, chunking,
    corpus fingerprint); at most `MEMO_SIZE` of each."""

    def __init__(self, run: RunContext) -> None:
        self.chunks: dict[tuple[str, str], list[Chunk]] = {}
        self.indexes: dict[tuple[int, str, str], Index] = {}


def chunks_of(corpus: Corpus, chunking: Chunking) -> list[Chunk]:
    """The corpus's chunks under one strategy, cut once per run."""
    cut = current().part(Indexes).chunks
    key = (canonical_json(chunking.model_dump()), corpus.fingerprint)
    if key not in cut:
        if len(cut) >= MEMO_SIZE:
            cut.clear()
        cut[key] = chunk_corpus(corpus, chunking)
    return cut[key]


def index_of(model: Retriever, corpus: Corpus, chunking: Chunking) -> Index:
    """The chunks indexed by the model (embedded, for an embedder) once per run. The index
    scores queries through the model it was built with, so it is kept per model object."""
    built = current().part(Indexes).indexes
    key = (id(model), canonical_json(chunking.model_dump()), corpus.fingerprint)
    if key not in built:
        chunks = chunks_of(corpus, chunking)
        texts = [chunk.text for chunk in chunks]
        note(f"{model.id}: indexing {len(texts)} chunks of {corpus.label} ({chunking.strategy})")
        scorer = model.index_documents(texts)
        if len(built) >= MEMO_SIZE:
            built.clear()
        built[key] = Index(chunks, scorer, _stats(model, chunks, texts, chunking), model)
    return built[key]


def _stats(model: Retriever, chunks: list[Chunk], texts: list[str], chunking: Chunking) -> dict[str, Any]:
    """How many chunks, their code sizes against the cap, and their tokens against the model's
    limit (the tokens past it are never read)."""
    sizes = sorted(len("".join(c.body.split())) for c in chunks)
    stats: dict[str, Any] = {
        "chunks": len(chunks),
        "longest_chunk_chars": sizes[-1] if sizes else 0,
        "median_chunk_chars": sizes[len(sizes) // 2] if sizes else 0,
    }
    if chunking.strategy != "line":
        stats["max_chars"] = chunking.cap
    limit = getattr(model, "context_limit", None)
    counting = getattr(model, "token_counts", None)
    counts = counting(texts) if limit and counting is not None else None
    if counts is not None and limit:
        stats |= token_stats(counts, int(limit))
    return stats


def token_stats(counts: list[int], limit: int) -> dict[str, int]:
    """Chunk sizes in a model's tokens against the tokens it reads: how many chunks it cuts,
    and how many of their tokens it never reads."""
    ordered = sorted(counts)
    stats = {
        "token_limit": limit,
        "chunks_over_limit": sum(1 for n in counts if n > limit),
        "chunk_tokens": sum(counts),
        "unread_tokens": sum(n - limit for n in counts if n > limit),
    }
    if ordered:
        stats["median_chunk_tokens"] = ordered[len(ordered) // 2]
        stats["p95_chunk_tokens"] = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        stats["longest_chunk_tokens"] = ordered[-1]
    return stats


# --- ranking -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranking:
    chunks: list[Chunk]  # every chunk of the corpus
    scores: list[float]  # per chunk
    order: list[int]  # chunk indices, best first (the searched ones only)
    files: list[tuple[str, float]]  # files best first, each scored by its best chunk
    stats: dict[str, Any]
    expected: dict[str, str] | None = None  # expected file name -> its path in the corpus
    reranking: Reordered | None = None  # a two-stage system's second stage


def first_texts(case: CodeItem, model: Model) -> tuple[list[str], list[str]]:
    """What an embedder's item embeds: the query (the corpus is indexed apart, once per model)."""
    return [case.input.query], []


def search(model: Retriever | Reranker, case: CodeItem) -> Ranking:
    """Rank the chunks of the case's corpus for its query (of its type, under `by_type`). A
    two-stage system's first stage ranks them all, its reranker reorders the best `top_n`."""
    from ragmatrix.models.two_stage import rerank_top, stages

    first, reranker = stages(model)
    corpus = corpus_of(case)
    resolved, problems = resolve_expected(case, corpus)
    if problems:  # checked at collection; a corpus changed since then
        raise CaseInputError(f"case '{case.name}': {problems[0]}")
    index = index_of(first, corpus, case.input.chunking)
    if not index.chunks:
        raise CaseInputError(f"case '{case.name}': the corpus ({corpus.label}) gives no chunks")
    only: bool | None = None
    if case.input.search == "by_type":
        only = case.input.query_type == "doc"
    queries, _ = first_texts(case, model)
    scores = index.scorer.score(queries)[0]
    if reranker is None:
        return rank(index, scores, only_docs=only, expected=resolved)
    searchable = None if only is None else index.doc_chunks == only
    texts = [chunk.text for chunk in index.chunks]
    reordered = rerank_top(scores, texts, queries[0], reranker, searchable)
    return rank(index, reordered.scores, only_docs=only, expected=resolved, reranking=reordered)


def rank(
    index: Index,
    scores: np.ndarray | list[float],
    only_docs: bool | None = None,
    expected: dict[str, str] | None = None,
    reranking: Reordered | None = None,
) -> Ranking:
    """Chunks by score, best first (ties in corpus order), and files by their best chunk.
    `only_docs` True or False ranks documentation or code chunks only."""
    import numpy as np

    values = np.asarray(scores, dtype=np.float64)
    searched = np.arange(len(values))
    if only_docs is not None:
        searched = searched[index.doc_chunks == only_docs]
    order = searched[np.argsort(-values[searched], kind="stable")]
    names, ids = index.file_ids
    ranked_ids = ids[order]
    _, first = np.unique(ranked_ids, return_index=True)  # each file's best chunk
    best = np.sort(first)
    files = [(names[int(ranked_ids[i])], float(values[order[i]])) for i in best]
    return Ranking(index.chunks, values.tolist(), order.tolist(), files, index.stats, expected, reranking)


# --- scoring -----------------------------------------------------------------------------------


def holds_answer(case: CodeItem, chunk: Chunk, expected: dict[str, str] | None = None) -> bool:
    """Where the case gives answer regions: the chunk matches one of them. Otherwise: it comes
    from an expected file, and its code has a keyword or overlaps the answer lines."""
    given = case.expected
    paths = expected if expected is not None else {name: name for name in given.expected_files}
    from_expected = chunk.path in paths.values()
    if given.answer_regions is not None:
        return any(_in_region(region, chunk, from_expected) for region in given.answer_regions)
    if not from_expected:
        return False
    if any(keyword in chunk.body for keyword in given.answer_keywords):
        return True
    return any(
        chunk.overlaps(start, end)
        for name, spans in given.answer_lines.items()
        if paths.get(name) == chunk.path
        for start, end in spans
    )


def _in_region(region: AnswerRegion, chunk: Chunk, from_expected: bool) -> bool:
    if not region.keywords and region.lines is None:
        return False
    if region.file_pattern is not None:
        if region.file_pattern not in chunk.path:
            return False
    elif not from_expected:
        return False
    if region.keywords and not any(keyword in chunk.body for keyword in region.keywords):
        return False
    return region.lines is None or chunk.overlaps(*region.lines)


def metrics(case: CodeItem, ranking: Ranking, k: int = TOP_K) -> dict[str, float]:
    expected = ranking.expected or {name: name for name in case.expected.expected_files}
    relevant_files = {path: 1.0 for path in expected.values()}
    files = [path for path, _ in ranking.files]
    values = ranking_metrics(files, relevant_files, k)
    if case.expected.has_answers:
        top = ranking.order[:k]
        answers = {i: 1.0 for i in top if holds_answer(case, ranking.chunks[i], expected)}
        values |= {
            "answer_hit_at_1": hit_at_k(top, answers, 1),
            "answer_hit_at_3": hit_at_k(top, answers, 3),
            "answer_hit_at_5": hit_at_k(top, answers, 5),
            f"answer_mrr_at_{k}": mrr_at_k(top, answers, k),
        }
    return {name: round(value, 6) for name, value in values.items()}


# What a case says it is, the leaderboard's breakdowns (with its tags); a row holds only those given.
TYPED = ("query_type", "difficulty")


def score(case: CodeItem, ranking: Ranking) -> Outcome:
    """File-level nDCG@10 is the score; every metric, and the top files and chunks with their
    scores, go into the details, so a failed query can be read off its row. The query type,
    difficulty and tags go there too: the leaderboard breaks results down by them. Beside
    this project's metrics, the Rust tool's answer metrics as it computes them (`rust_tool`).
    A two-stage system's ranking with a chunk its reranker gave no valid relevance is invalid."""
    reranking = ranking.reranking
    if reranking is not None and reranking.invalid:
        shown = f"{len(reranking.invalid)} of {len(reranking.reranked)}"
        reason = f"{shown} chunks got no valid relevance from the reranker"
        return Outcome.invalid(reason, reranking=reranking.details())
    values = metrics(case, ranking)
    expected = ranking.expected or {name: name for name in case.expected.expected_files}
    wanted = set(expected.values())
    top_files = [
        {"file": path, "score": round(value, 4), "expected": path in wanted} for path, value in ranking.files[:TOP_K]
    ]
    top_chunks = []
    for i in ranking.order[:TOP_K]:
        chunk = ranking.chunks[i]
        entry: dict[str, Any] = {
            "file": chunk.path,
            "lines": f"{chunk.start}-{chunk.end}",
            "score": round(ranking.scores[i], 4),
        }
        if case.expected.has_answers:
            entry["answer"] = holds_answer(case, chunk, expected)
        if chunk.context:
            entry["context"] = chunk.context
        if reranking is not None and i in reranking.first_ranks:
            entry["first_stage_rank"] = reranking.first_ranks[i]
        top_chunks.append(entry)
    details: dict[str, Any] = {"metrics": values}
    if reranking is not None:
        details["reranking"] = reranking.details()
    details |= {name: getattr(case.input, name) for name in TYPED if getattr(case.input, name) != UNSPECIFIED}
    details |= {"top_files": top_files, "top_chunks": top_chunks, "index": ranking.stats}
    if case.expected.has_answers:
        details[rust_tool.FIELD] = rust_tool.answer_metrics(case, ranking.chunks, ranking.order, TOP_K)
    tags = case.metadata.get("tags")
    if tags:
        details["tags"] = list(tags) if isinstance(tags, list | tuple) else [str(tags)]
    if case.input.search != "all":
        details["search"] = case.input.search
    return Outcome(score=values[f"ndcg_at_{TOP_K}"], **details)

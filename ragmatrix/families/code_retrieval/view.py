"""What a code retrieval item shows when it is opened, and its ranking as TREC files carry it.

An item shows its query and expected files (from the case), the files and chunks the model
ranked first with their scores, the rank of the first expected file and of the first chunk
that holds the answer, and, where the corpus is at hand, each ranked chunk's lines as the
corpus holds them now.
"""

from __future__ import annotations

from typing import Any

from ragmatrix.families.code_retrieval.corpus import Corpus
from ragmatrix.families.code_retrieval.retrieval import corpus_of, resolve_expected
from ragmatrix.families.code_retrieval.schema import CodeItem
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.results.rows import Iteration, Row
from ragmatrix.seam.case import CaseInputError
from ragmatrix.seam.detail import Fields, ItemView, Listing, Part, Text, number
from ragmatrix.seam.family import Rankings

# The most characters of a chunk's lines shown: a chunk is capped well below this, a line
# window of a minified file is not.
CHUNK_CHARS = 4000


def asked(case: CodeItem, row: Row) -> list[Part]:
    query = case.input
    fields = [
        ("query", query.query),
        ("query type", query.query_type),
        ("difficulty", query.difficulty),
        ("search", query.search),
        ("corpus", query.corpus.label),
        ("chunking", case.variant or "-"),
    ]
    parts: list[Part] = [Fields("query", fields)]
    resolved = _resolved(case)
    expected = case.expected
    parts.append(
        Listing(
            "expected files",
            ["expected file", "in the corpus"],
            [[name, resolved.get(name, "not found")] for name in expected.expected_files],
        )
    )
    answer: list[tuple[str, str]] = []
    if expected.answer_keywords:
        answer.append(("answer keywords", ", ".join(expected.answer_keywords)))
    for path, spans in expected.answer_lines.items():
        answer.append((f"answer lines in {path}", ", ".join(f"{a}-{b}" for a, b in spans)))
    for index, region in enumerate(expected.answer_regions or [], start=1):
        where = [
            f"keywords {', '.join(region.keywords)}" if region.keywords else "",
            f"lines {region.lines[0]}-{region.lines[1]}" if region.lines else "",
            f"files matching {region.file_pattern}" if region.file_pattern else "",
        ]
        answer.append((f"answer region {index}", "; ".join(w for w in where if w) or "matches nothing"))
    if answer:
        parts.append(Fields("where the answer is", answer))
    return parts


def answered(iteration: Iteration, case: CodeItem | None) -> list[Part]:
    found = iteration.details
    files: list[dict[str, Any]] = [f for f in found.get("top_files", []) if isinstance(f, dict)]
    chunks: list[dict[str, Any]] = [c for c in found.get("top_chunks", []) if isinstance(c, dict)]
    if not files and not chunks:
        return []
    first_file = next((rank for rank, f in enumerate(files, 1) if f.get("expected")), None)
    answers = [c.get("answer") for c in chunks]
    first_answer = next((rank for rank, holds in enumerate(answers, 1) if holds), None)
    summary = [
        ("first expected file at rank", str(first_file) if first_file else f"none in the top {len(files)}"),
        (
            "first chunk holding the answer at rank",
            "no answer key"
            if all(a is None for a in answers)
            else (str(first_answer) if first_answer else f"none in the top {len(chunks)}"),
        ),
    ]
    index = found.get("index")
    if isinstance(index, dict):
        summary += [(f"index: {name.replace('_', ' ')}", number(value)) for name, value in index.items()]
    parts: list[Part] = [Fields("ranking", summary)]
    parts.append(
        Listing(
            "ranked files",
            ["rank", "file", "score", "expected"],
            [
                [str(rank), str(f.get("file")), number(f.get("score")), "yes" if f.get("expected") else ""]
                for rank, f in enumerate(files, 1)
            ],
            marked=[bool(f.get("expected")) for f in files],
            numeric={0, 2},
        )
    )
    parts.append(
        Listing(
            "ranked chunks",
            ["rank", "file", "lines", "score", "holds the answer", "context"],
            [
                [
                    str(rank),
                    str(c.get("file")),
                    str(c.get("lines")),
                    number(c.get("score")),
                    "-" if c.get("answer") is None else ("yes" if c.get("answer") else ""),
                    str(c.get("context", "")),
                ]
                for rank, c in enumerate(chunks, 1)
            ],
            marked=[bool(c.get("answer")) for c in chunks],
            numeric={0, 3},
        )
    )
    corpus = _corpus(case)
    if corpus is not None:
        for rank, chunk in enumerate(chunks, 1):
            text = _lines(corpus, str(chunk.get("file")), str(chunk.get("lines")))
            if text is not None:
                parts.append(Text(f"chunk {rank}: {chunk.get('file')} lines {chunk.get('lines')}", text))
    return parts


def ranked(iteration: Iteration) -> list[tuple[str, float]]:
    """The files an iteration ranked, best first, each scored by its best chunk."""
    files = iteration.details.get("top_files", [])
    return [(str(f["file"]), float(f["score"])) for f in files if isinstance(f, dict) and "file" in f]


def judged(case: CodeItem) -> dict[str, int]:
    """The expected files, as their corpus paths: relevant (1); every other file is not."""
    return {path: 1 for path in _resolved(case).values()}


def _resolved(case: CodeItem) -> dict[str, str]:
    """Each expected file's path in the corpus; empty where the corpus cannot be read."""
    corpus = _corpus(case)
    return resolve_expected(case, corpus)[0] if corpus is not None else {}


def _corpus(case: CodeItem | None) -> Corpus | None:
    if case is None:
        return None
    try:
        return corpus_of(case)
    except CaseInputError:
        return None


class _FileLines:
    """Each corpus file's lines, split once per run and corpus."""

    def __init__(self, run: RunContext) -> None:
        self.by_corpus: dict[str, dict[str, list[str]]] = {}


def _lines(corpus: Corpus, path: str, span: str) -> str | None:
    """The lines `start-end` of a corpus file, or None where the file or the lines are gone."""
    split = current().part(_FileLines).by_corpus
    if corpus.fingerprint not in split:
        split[corpus.fingerprint] = {f.path: f.text.splitlines() for f in corpus.files}
    lines = split[corpus.fingerprint].get(path)
    start, _, end = span.partition("-")
    if lines is None or not start.isdigit() or not (end or start).isdigit():
        return None
    first, last = int(start), int(end or start)
    if first < 1 or last > len(lines) or last < first:
        return None
    text = "\n".join(lines[first - 1 : last])
    return (
        text if len(text) <= CHUNK_CHARS else text[:CHUNK_CHARS] + f"\n... ({len(text) - CHUNK_CHARS} more characters)"
    )


VIEW = ItemView(asked=asked, answered=answered)
RANKINGS = Rankings(ranked=ranked, judged=judged)

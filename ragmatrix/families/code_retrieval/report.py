"""Code retrieval's own part of the leaderboard: what each model read of its chunks, and the
Rust embedding benchmark's table, under the family's tables in the terminal and the report.

- **Truncation.** Per model and chunking, from the index figures every row carries: the share
  of chunks longer than the tokens the model reads (it cuts them silently) and the share of the
  chunks' tokens it never reads, with a warning when that share is `UNREAD_WARNING` or more:
  such a model is scored on the beginnings of its chunks.
- **The Rust tool's table shape with speed** (`speed_table`, in the report's cost section): per
  model and chunking, this project's file- and answer-level means beside the embeddings per
  second of the model's own encode time (from the cost records).
- **The Rust tool's table.** Per model and chunking: file nDCG@10 (the tool's and this project's
  agree), and the tool's answer nDCG@10, Hit@1/3/5 and MRR@10 as it computes them
  (`rust_tool`), overall and for code and doc queries, so that its published tables can be set
  beside a run.

They are written with the report's data types (`ragmatrix.seam.tables`, `ragmatrix.seam.blocks`,
`ragmatrix.cost.figures`), never with the report itself.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ragmatrix.cost.figures import FamilyCosts
from ragmatrix.families.code_retrieval import rust_tool
from ragmatrix.foundations.keys import canonical_json
from ragmatrix.results.rows import Row
from ragmatrix.seam.blocks import Block, Bullets, Heading, Paragraph, Table, aligned
from ragmatrix.seam.tables import FamilyTable

# A model that never reads this share of its chunks' tokens, or more, gets a warning.
UNREAD_WARNING = 0.05


@dataclass
class Truncation:
    """What one model read of one chunking's chunks, over the distinct indexes its rows used."""

    model: str
    chunking: str
    token_limit: int
    chunks: int
    cut: int  # chunks longer than the limit
    tokens: int | None  # every chunk's tokens; None for rows recorded before it was counted
    unread: int | None  # the tokens past the limit, which the model never reads

    @property
    def cut_share(self) -> float:
        return self.cut / self.chunks if self.chunks else 0.0

    @property
    def unread_share(self) -> float | None:
        if self.tokens is None or self.unread is None or not self.tokens:
            return None
        return self.unread / self.tokens

    @property
    def warned(self) -> bool:
        share = self.unread_share
        return share is not None and share >= UNREAD_WARNING

    def warning(self) -> str:
        share = self.unread_share or 0.0
        return (
            f"{self.model} on {self.chunking} chunks: {self.cut} of {self.chunks} chunks ({self.cut_share:.0%}) are "
            f"longer than the {self.token_limit} tokens it reads, and {share:.0%} of their text is never read: "
            f"its scores measure the chunks' beginnings (smaller chunks, a lower max_chars, or a model that reads "
            f"more would measure the rest)"
        )


def truncation(table: FamilyTable) -> list[Truncation]:
    """Per model and chunking, the truncation of the chunks its rows were ranked over; models
    without a token limit (BM25, or a tokenizer that cannot be read) are left out."""
    indexes: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in table.rows:
        for entry in row.scored_iterations()[:1]:
            stats = entry.details.get("index")
            if isinstance(stats, dict) and stats.get("token_limit"):
                indexes[(row.model, row.variant or "-")][canonical_json(stats)] = stats
    lines = []
    for (model, chunking), found in sorted(indexes.items()):
        every = list(found.values())
        counted = all("chunk_tokens" in s and "unread_tokens" in s for s in every)
        lines.append(
            Truncation(
                model=model,
                chunking=chunking,
                token_limit=max(int(s["token_limit"]) for s in every),
                chunks=sum(int(s.get("chunks", 0)) for s in every),
                cut=sum(int(s.get("chunks_over_limit", 0)) for s in every),
                tokens=sum(int(s["chunk_tokens"]) for s in every) if counted else None,
                unread=sum(int(s["unread_tokens"]) for s in every) if counted else None,
            )
        )
    return lines


@dataclass
class ToolLine:
    """One model and chunking in the Rust tool's table: means over queries, and how many."""

    model: str
    chunking: str
    queries: int
    answer_queries: int  # queries with an answer: the tool's answer means are over these
    values: dict[str, float]  # "file" and each rust_tool name, overall, "code:..." and "doc:..."


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def tool_lines(table: FamilyTable) -> list[ToolLine]:
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in table.rows:
        if row.scored_iterations():
            groups[(row.model, row.variant or "-")].append(row)
    lines = []
    for (model, chunking), rows in sorted(groups.items()):
        files: dict[str, list[float]] = defaultdict(list)
        answers: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for row in rows:
            entry = row.scored_iterations()[0]
            kind = entry.details.get("query_type")
            for scope in ("", f"{kind}:") if kind in ("code", "doc") else ("",):
                files[scope].append(float(row.item_score() or 0.0))
                found = entry.details.get(rust_tool.FIELD)
                if isinstance(found, dict):
                    for name in rust_tool.NAMES:
                        if name in found:
                            answers[scope][name].append(float(found[name]))
        values: dict[str, float] = {}
        for scope, scores in files.items():
            values[f"{scope}file"] = _mean(scores) or 0.0
            for name, found_values in answers[scope].items():
                mean = _mean(found_values)
                if mean is not None:
                    values[f"{scope}{name}"] = mean
        answer_queries = len(answers[""]["answer_ndcg_at_10"]) if "" in answers else 0
        if answer_queries or any(k != "file" for k in values):
            lines.append(ToolLine(model, chunking, len(files[""]), answer_queries, values))
    return lines


_TOOL_COLUMNS = (
    ("file nDCG@10", "file"),
    ("answer nDCG@10", "answer_ndcg_at_10"),
    ("code file", "code:file"),
    ("code answer", "code:answer_ndcg_at_10"),
    ("doc file", "doc:file"),
    ("doc answer", "doc:answer_ndcg_at_10"),
    ("Hit@1", "answer_hit_at_1"),
    ("Hit@3", "answer_hit_at_3"),
    ("Hit@5", "answer_hit_at_5"),
    ("MRR@10", "answer_mrr_at_10"),
)
_TOOL_NOTE = (
    "as the Rust tool computes them (answer metrics: a keyword matches in any file, and answer nDCG@10 "
    "divides by the answers found in the top 10); means over queries, the answer ones over the queries "
    "with an answer"
)


def _tool_rows(lines: list[ToolLine]) -> list[list[str]]:
    rows = []
    for line in lines:
        cells = [f"{line.values[key]:.3f}" if key in line.values else "-" for _, key in _TOOL_COLUMNS]
        rows.append([line.model, line.chunking, str(line.queries), str(line.answer_queries), *cells])
    return rows


def _truncation_rows(lines: list[Truncation]) -> list[list[str]]:
    rows = []
    for line in lines:
        unread = line.unread_share
        rows.append(
            [
                line.model,
                line.chunking,
                str(line.token_limit),
                str(line.chunks),
                str(line.cut),
                f"{line.cut_share:.0%}",
                "-" if unread is None else f"{unread:.0%}",
                "warning" if line.warned else "",
            ]
        )
    return rows


_TRUNCATION_HEADER = ["model", "chunking", "reads (tokens)", "chunks", "cut", "cut share", "never read", ""]
_TOOL_HEADER = ["model", "chunking", "queries", "with answer", *[name for name, _ in _TOOL_COLUMNS]]


def terminal_notes(table: FamilyTable) -> list[str]:
    """The truncation table and its warnings, and the Rust tool's table, for the terminal."""
    out: list[str] = []
    cuts = truncation(table)
    if cuts:
        out += ["", f"{table.family}: what each model read of its chunks (cut: longer than it reads)"]
        out += aligned([tuple(_TRUNCATION_HEADER), *map(tuple, _truncation_rows(cuts))], numeric={2, 3, 4, 5, 6})
        out += [f"warning: {line.warning()}" for line in cuts if line.warned]
    tools = tool_lines(table)
    if tools:
        out += ["", f"{table.family}: the Rust tool's table, {_TOOL_NOTE}"]
        out += aligned([tuple(_TOOL_HEADER), *map(tuple, _tool_rows(tools))], numeric=set(range(2, 14)))
    return out


def section(table: FamilyTable, images: list[str]) -> list[Block]:
    """The same two tables for the report."""
    blocks: list[Block] = []
    cuts = truncation(table)
    if cuts:
        blocks += [
            Heading(3, f"{table.family}: what each model read of its chunks"),
            Paragraph(
                "A model reads a chunk up to its token limit and ignores the rest without a word. **cut** counts "
                "the chunks longer than that (over the distinct corpora of the rows), **never read** is the share "
                f"of all their tokens past the limit; {UNREAD_WARNING:.0%} or more is a warning. `-`: rows recorded "
                "before the tokens were counted."
            ),
            Table(_TRUNCATION_HEADER, _truncation_rows(cuts), numeric={2, 3, 4, 5, 6}),
        ]
        warnings = [line.warning() for line in cuts if line.warned]
        if warnings:
            blocks.append(Bullets([f"**Warning**: {text}" for text in warnings]))
    tools = tool_lines(table)
    if tools:
        blocks += [
            Heading(3, f"{table.family}: the Rust tool's table"),
            Paragraph(
                f"File nDCG@10 is the same in the tool and here; the answer metrics are {_TOOL_NOTE}. They are "
                "not this project's answer metrics (see docs/seeds/rust-embedding-benchmark.md): they are here to "
                "set beside the tool's published tables."
            ),
            Table(_TOOL_HEADER, _tool_rows(tools), numeric=set(range(2, 14))),
        ]
    return blocks


COLUMNS = (
    ("file nDCG@10", "ndcg_at_10"),
    ("MRR@10", "mrr_at_10"),
    ("Recall@10", "recall_at_10"),
    ("P@1", "precision_at_1"),
    ("answer Hit@1", "answer_hit_at_1"),
    ("answer Hit@3", "answer_hit_at_3"),
    ("answer Hit@5", "answer_hit_at_5"),
    ("answer MRR@10", "answer_mrr_at_10"),
)


def speed_table(table: FamilyTable, costs: FamilyCosts) -> list[Block]:
    """Per model and chunking: the file- and answer-level means and the embeddings per second."""
    lines = table.metrics_by_variant or table.metrics
    if not lines:
        return []
    rows = []
    for line in sorted(lines, key=lambda metric: (metric.model, metric.variant)):
        values = [line.values.get(name) for _, name in COLUMNS]
        speed = costs.by_variant.get((line.model, line.variant))
        if speed is None and not table.metrics_by_variant:
            main = costs.of(line.model).main
            speed = main.embeddings_per_s if main is not None else None
        device = costs.of(line.model).main
        rows.append(
            [
                line.model,
                line.variant,
                str(line.n),
                *["-" if value is None else f"{value.mean:.3f}" for value in values],
                "-" if speed is None else f"{speed:,.1f}",
                device.device if device is not None else "-",
            ]
        )
    header = ["model", "chunking", "items", *[title for title, _ in COLUMNS], "emb/s", "device"]
    return [
        Heading(3, "code_retrieval: per model and chunking, as the Rust embedding benchmark reports it"),
        Paragraph(
            "Means over each model's items of a chunking (the intervals are in the metric tables above); "
            "`emb/s` is texts per second of the model's own encode time for that chunking's index and "
            "queries, on the device named, never a cache read (`-`: nothing was encoded, every text came "
            "from the embedding cache, or the retriever has no speed figure for it)."
        ),
        Table(header, rows, numeric=set(range(2, len(header) - 1))),
    ]

"""Cutting source files into the chunks that a retriever ranks.

Three strategies, chosen per case variant:

- `line`: windows of `lines` lines that overlap by `overlap` lines, as they are (`windows`).
- `semantic`: along the syntax tree (`semantic`): one chunk per function, class and method,
  one per run of code between them, comments directly above a definition kept with it. A class
  with methods gives a chunk for its head (signature, docstring, attributes) and one per method.
  Markdown is cut at its headings (`markdown`). Every chunk starts with a `[file: path]` line
  and, inside a definition or a section, a `[context: ...]` line such as
  `[context: class JSONDecoder > def decode]` or a heading trail `Install > From source`
  (`chunk`). Semantic chunks are capped too (`max_chars`, by default `SEMANTIC_CAP`): a
  definition larger than the cap is split along its syntax as `bounded` splits it, each part
  keeping the definition's context; a run of code or a section over the cap is packed by whole
  lines.
- `bounded`: split then merge, as in cAST (`bounded`): sibling syntax nodes are packed greedily
  into chunks of at most `max_chars` non-white-space characters, and a node too large for one
  chunk is split into its children, recursively, down to single lines (and a line too long for
  a chunk into pieces). No chunk's code exceeds the cap, so the cap can be set below a model's
  sequence limit.

`languages` says which grammar parses a file; a file with no grammar falls back to line
windows (`semantic`) or capped line packing (`bounded`), with the file header, and is reported
once per run and extension (`NoGrammarWarning`). Every chunk keeps its file's path and its
1-based, inclusive line range.

The defaults below are part of scoring: changing one means bumping the family's scoring version.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from ragmatrix.families.code_retrieval.chunking.bounded import bounded, segments
from ragmatrix.families.code_retrieval.chunking.chunk import Chunk, context_header
from ragmatrix.families.code_retrieval.chunking.languages import (
    RULES,
    NoGrammarWarning,
    ParsedFile,
    language_of,
    parse,
    report_no_grammar,
)
from ragmatrix.families.code_retrieval.chunking.markdown import markdown_chunks, markdown_sections
from ragmatrix.families.code_retrieval.chunking.pieces import Sizes, pack_lines, to_chunks
from ragmatrix.families.code_retrieval.chunking.semantic import semantic_pieces
from ragmatrix.families.code_retrieval.chunking.windows import line_chunks
from ragmatrix.families.code_retrieval.corpus import Corpus
from ragmatrix.foundations.data_model import DataModel

__all__ = [
    "BOUNDED_CAP",
    "SEMANTIC_CAP",
    "Chunk",
    "Chunking",
    "NoGrammarWarning",
    "chunk_corpus",
    "chunk_file",
    "context_header",
    "language_of",
    "line_chunks",
    "markdown_sections",
]

BOUNDED_CAP = 400
# About 256 word pieces of code with its header: what MiniLM-sized models read (see
# docs/code_retrieval.md for the measurement).
SEMANTIC_CAP = 600


class Chunking(DataModel):
    """A chunking strategy and its settings (one variant of a case)."""

    model_config = ConfigDict(extra="forbid")

    strategy: Literal["line", "semantic", "bounded"]
    lines: int = Field(default=40, ge=1)  # line windows, and the semantic fallback
    overlap: int = Field(default=10, ge=0)
    # Non-white-space characters of code per chunk, at most: bounded and semantic chunks.
    max_chars: int | None = Field(default=None, ge=20)

    @model_validator(mode="after")
    def overlap_below_lines(self) -> Chunking:
        if self.overlap >= self.lines:
            raise ValueError("overlap must be smaller than lines")
        return self

    @property
    def cap(self) -> int:
        """The cap in force: `max_chars`, or the strategy's default."""
        if self.max_chars is not None:
            return self.max_chars
        return BOUNDED_CAP if self.strategy == "bounded" else SEMANTIC_CAP


def chunk_corpus(corpus: Corpus, chunking: Chunking) -> list[Chunk]:
    """Every file's chunks, in the corpus's file order."""
    return [chunk for source in corpus.files for chunk in chunk_file(source.path, source.text, chunking)]


def chunk_file(path: str, text: str, chunking: Chunking) -> list[Chunk]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline at the end of the last line
    if chunking.strategy == "line":
        return line_chunks(path, lines, chunking.lines, chunking.overlap, header=False)
    language = language_of(path, text)
    if language == "markdown":
        return markdown_chunks(path, lines, chunking.cap)
    rules = RULES.get(language or "")
    tree = parse(language, text) if rules is not None and language is not None else None
    if rules is None or tree is None:
        report_no_grammar(path)
        if chunking.strategy == "semantic":
            return line_chunks(path, lines, chunking.lines, chunking.overlap, header=True)
        return to_chunks(path, lines, pack_lines(Sizes(lines), 0, len(lines) - 1, (), chunking.cap))
    parsed = ParsedFile(rules, lines, text.encode("utf-8"))
    root = tree.root_node
    if chunking.strategy == "semantic":
        pieces = semantic_pieces(parsed, root, chunking.cap)
    else:
        pieces = bounded(parsed, segments(root, 0, len(lines) - 1), (), chunking.cap)
    return to_chunks(path, lines, pieces, rules.closing)

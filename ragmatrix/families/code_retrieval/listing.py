"""The chunks of a file or a folder as a case with `corpus: {path: PATH}` gets them, with their
sizes against a model's token limit: what `ragmatrix chunks` prints."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmatrix.families.code_retrieval.chunking import Chunk, Chunking, NoGrammarWarning, chunk_corpus
from ragmatrix.families.code_retrieval.corpus import CorpusSpec, load_corpus


@dataclass
class Listing:
    chunks: list[Chunk]
    files: int
    notes: list[str] = field(default_factory=list)  # files no grammar parses, once per extension
    tokens: list[int] | None = None  # each chunk's tokens in the model's tokenizer
    token_limit: int | None = None  # the tokens the model reads of a chunk


def list_chunks(path: Path, chunking: Chunking, include: list[str], exclude: list[str]) -> Listing:
    """The chunks, in file order; raises CaseInputError with one line when there are no files."""
    spec = CorpusSpec(path=str(path.resolve()), include=include, exclude=exclude)
    corpus = load_corpus(spec, Path.cwd())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NoGrammarWarning)
        chunks = chunk_corpus(corpus, chunking)
    notes = [str(w.message) for w in caught if issubclass(w.category, NoGrammarWarning)]
    return Listing(chunks, len(corpus.files), notes)


def count_tokens(listing: Listing, model: Any) -> str | None:
    """Each chunk's tokens as the model reads them, and its limit; or why they cannot be had
    without loading the model."""
    limit = getattr(model, "context_limit", None)
    counting = getattr(model, "token_counts", None)
    if counting is None:
        return f"{model.id} reads every token of a chunk (no limit): nothing is cut"
    counts = counting([chunk.text for chunk in listing.chunks])
    if counts is None or not limit:
        return f"{model.id}: its tokenizer and limit cannot be read without loading the model: sizes in characters only"
    listing.tokens, listing.token_limit = counts, int(limit)
    return None


def code_chars(chunk: Chunk) -> int:
    """The chunk's code in characters, white space not counted: what `max_chars` caps."""
    return len("".join(chunk.body.split()))


def chunk_line(listing: Listing, index: int) -> str:
    """`path:start-end  N chars  M tokens, cut (K unread)  [context]`."""
    chunk = listing.chunks[index]
    line = f"{chunk.path}:{chunk.start}-{chunk.end}  {code_chars(chunk)} chars"
    if listing.tokens is not None and listing.token_limit is not None:
        tokens = listing.tokens[index]
        line += f"  {tokens} tokens"
        if tokens > listing.token_limit:
            line += f", cut ({tokens - listing.token_limit} unread)"
    if chunk.context:
        line += f"  [{chunk.context}]"
    return line


def summary(listing: Listing, chunking: Chunking, model: str | None = None) -> str:
    settings = (
        f"{chunking.lines} lines, overlap {chunking.overlap}"
        if chunking.strategy == "line"
        else f"at most {chunking.cap} chars of code"
    )
    chunks = len(listing.chunks)
    line = f"{chunks} {chunking.strategy} chunks ({settings}) from {listing.files} file(s)"
    if listing.tokens is not None and listing.token_limit is not None and model is not None:
        limit = listing.token_limit
        cut = sum(1 for n in listing.tokens if n > limit)
        total = sum(listing.tokens)
        unread = sum(n - limit for n in listing.tokens if n > limit)
        share = f"{cut / chunks:.0%}" if chunks else "0%"
        never = f"{unread / total:.0%}" if total else "0%"
        line += f"; {model} reads {limit} tokens: {cut} chunk(s) cut ({share}), {never} of their tokens never read"
    return line

"""Pieces: the line ranges the capped strategies cut a file into before they become chunks,
how large a range's code is, and packing whole lines under a cap."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ragmatrix.families.code_retrieval.chunking.chunk import Chunk


@dataclass
class Piece:
    start: int  # 0-based rows, inclusive
    end: int
    trail: tuple[str, ...]  # the definitions (or headings) around it, outermost first
    definition: bool = False
    text: str | None = None  # a piece of a line, when one line is over the cap


def to_chunks(
    path: str, lines: list[str], pieces: Iterable[Piece], closing: re.Pattern[str] | None = None
) -> list[Chunk]:
    """The pieces as chunks, blank lines at either end left out of each range. A piece of
    nothing but blank lines, punctuation (a lone closing brace) or, where the language has
    them, closing words (`closing`: Ruby's `end`) gives no chunk."""
    chunks = []
    for piece in pieces:
        start, end = piece.start, piece.end
        if piece.text is None:  # blank lines at either end are left out of the range
            while start < end and not lines[start].strip():
                start += 1
            while end > start and not lines[end].strip():
                end -= 1
        body = piece.text if piece.text is not None else "\n".join(lines[start : end + 1])
        if not re.search(r"\w", body):  # blank lines or a lone closing brace
            continue
        if closing is not None and closing.fullmatch(body):
            continue
        chunks.append(Chunk(path, start + 1, end + 1, body, " > ".join(piece.trail)))
    return chunks


class Sizes:
    """Non-white-space characters per line, summed for any range in constant time."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.prefix = [0]
        for line in lines:
            self.prefix.append(self.prefix[-1] + len(line) - sum(1 for c in line if c.isspace()))

    def __call__(self, start: int, end: int) -> int:
        return self.prefix[end + 1] - self.prefix[start]


def pack_lines(sizes: Sizes, start: int, end: int, trail: tuple[str, ...], cap: int) -> list[Piece]:
    """Whole lines packed greedily up to the cap; a line over the cap alone is cut into pieces."""
    pieces: list[Piece] = []
    first: int | None = None
    total = 0
    for row in range(start, end + 1):
        size = sizes(row, row)
        if first is not None and total + size > cap:
            pieces.append(Piece(first, row - 1, trail))
            first, total = None, 0
        if size > cap:
            pieces.extend(Piece(row, row, trail, text=part) for part in cut_line(sizes.lines[row], cap))
            continue
        if first is None:
            first = row
        total += size
    if first is not None:
        pieces.append(Piece(first, end, trail))
    return pieces


def cut_line(line: str, cap: int) -> list[str]:
    """A line in pieces of at most `cap` non-white-space characters each."""
    parts: list[str] = []
    current: list[str] = []
    count = 0
    for char in line:
        if not char.isspace():
            if count == cap:
                parts.append("".join(current))
                current, count = [], 0
            count += 1
        current.append(char)
    if current:
        parts.append("".join(current))
    return parts

"""Markdown cut at its headings, each section with the trail of headings above it."""

from __future__ import annotations

import re

from ragmatrix.families.code_retrieval.chunking.chunk import Chunk
from ragmatrix.families.code_retrieval.chunking.pieces import Piece, Sizes, pack_lines, to_chunks

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def markdown_sections(lines: list[str]) -> list[Piece]:
    """One piece per heading, up to the next heading, with the trail of headings above it; the
    text before the first heading is a piece with no trail. Fenced code is not searched for
    headings."""
    pieces: list[Piece] = []
    trail: list[tuple[int, str]] = []
    fence: str | None = None
    start = 0
    current: tuple[str, ...] = ()
    for row, line in enumerate(lines):
        opened = _FENCE.match(line)
        if opened:
            fence = None if fence == opened.group(1) else (fence or opened.group(1))
            continue
        heading = _HEADING.match(line) if fence is None else None
        if heading is None:
            continue
        if row > start:
            pieces.append(Piece(start, row - 1, current))
        level = len(heading.group(1))
        trail = [(lvl, title) for lvl, title in trail if lvl < level] + [(level, heading.group(2).strip())]
        current = tuple(title for _, title in trail)
        start = row
    if start < len(lines):
        pieces.append(Piece(start, len(lines) - 1, current))
    return pieces


def markdown_chunks(path: str, lines: list[str], cap: int) -> list[Chunk]:
    """A chunk per section; a section over the cap is packed by whole lines, in its trail."""
    sizes = Sizes(lines)
    capped: list[Piece] = []
    for section in markdown_sections(lines):
        if sizes(section.start, section.end) <= cap:
            capped.append(section)
        else:
            capped.extend(pack_lines(sizes, section.start, section.end, section.trail, cap))
    return to_chunks(path, lines, capped)

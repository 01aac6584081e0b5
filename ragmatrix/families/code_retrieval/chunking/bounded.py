"""Split then merge, as in cAST: sibling syntax nodes packed greedily into pieces of at most
`cap` non-white-space characters of code; a node too large for one piece is split into its
children, recursively, down to single lines (and a line too long into pieces of that line)."""

from __future__ import annotations

from dataclasses import dataclass

from ragmatrix.families.code_retrieval.chunking.languages import Node, ParsedFile, last_row
from ragmatrix.families.code_retrieval.chunking.pieces import Piece, pack_lines


@dataclass
class Segment:
    start: int
    end: int
    node: Node


def segments(node: Node, first: int, last: int) -> list[Segment]:
    """The node's children as consecutive line ranges that cover rows first..last: the lines
    before a child (blank lines, a shared line) go with it, the lines after the last child with
    that child. A child wholly on lines already taken joins the previous segment."""
    found: list[Segment] = []
    cursor = first
    for child in node.children:
        end = min(last_row(child), last)
        if end < cursor:
            continue
        found.append(Segment(cursor, end, child))
        cursor = end + 1
    if found and found[-1].end < last:
        found[-1].end = last
    return found


def bounded(parsed: ParsedFile, parts: list[Segment], trail: tuple[str, ...], cap: int) -> list[Piece]:
    """Split then merge: siblings packed greedily up to the cap, a sibling over the cap split
    into its own children first. Code just before a split part (a signature, a decorator)
    joins its first part, and small siblings after it join its last part, when they fit."""
    sizes = parsed.sizes
    pieces: list[Piece] = []
    current: Piece | None = None  # the piece being filled
    total = 0
    labels: list[str] = []  # definitions in it, named in its context
    relabel = True  # False when it is the last part of a split: it keeps its own context

    def close() -> None:
        nonlocal current, total, relabel
        if current is not None:
            if labels and relabel:
                current.trail, current.definition = (*trail, ", ".join(labels)), True
            elif labels and len(current.trail) > len(trail):  # a split's last part, and more
                current.trail = (*trail, ", ".join([current.trail[len(trail)], *labels]))
            pieces.append(current)
        current, total, relabel = None, 0, True
        labels.clear()

    for segment in parts:
        size = sizes(segment.start, segment.end)
        found = parsed.definition(segment.node)
        if size > cap:
            # A wrapper (decorators, export) names its definition one level down.
            named = found is not None and found[0] is segment.node
            inner_trail = (*trail, found[1]) if found is not None and named else trail
            children = segments(segment.node, segment.start, segment.end)
            if children:
                split = bounded(parsed, children, inner_trail, cap)
            else:
                split = pack_lines(sizes, segment.start, segment.end, inner_trail, cap)
            first = split[0]
            if (
                current is not None
                and relabel
                and not labels
                and first.text is None
                and (total + sizes(first.start, first.end) <= cap)
            ):
                first.start = current.start
                current, total = None, 0
            close()
            pieces.extend(split[:-1])
            last = split[-1]
            if last.text is None:
                current, total, relabel = last, sizes(last.start, last.end), False
            else:
                pieces.append(last)
            continue
        if current is not None and total + size > cap:
            close()
        if current is None:
            current = Piece(segment.start, segment.end, trail)
        current.end = segment.end
        total += size
        if found is not None:
            labels.append(found[1])
    close()
    return pieces

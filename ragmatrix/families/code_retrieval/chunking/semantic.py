"""Semantic pieces along the syntax tree: one per function, class and method, one per run of
code between them, the comments right above a definition kept with it. A container (a class
with methods, an impl block) gives a piece for its head and one per member. A definition over
the cap is split along its syntax as `bounded` splits it, each part in the definition's
context; a run of code over the cap is packed by whole lines."""

from __future__ import annotations

from ragmatrix.families.code_retrieval.chunking.bounded import bounded, segments
from ragmatrix.families.code_retrieval.chunking.languages import COMMENTS, Node, ParsedFile, last_row
from ragmatrix.families.code_retrieval.chunking.pieces import Piece, pack_lines


def semantic_pieces(parsed: ParsedFile, root: Node, cap: int) -> list[Piece]:
    """The whole file's semantic pieces, each at most `cap` characters of code."""
    walker = _Walker(parsed, cap)
    return walker.capped(walker.semantic(list(root.named_children), ()))


class _Walker:
    def __init__(self, parsed: ParsedFile, cap: int) -> None:
        self.parsed = parsed
        self.cap = cap

    def semantic(self, children: list[Node], trail: tuple[str, ...]) -> list[Piece]:
        children = _in_place(children, self.parsed.rules.transparent)
        pieces: list[Piece] = []
        covered = -1  # the last row already in a piece
        comments_from: int | None = None  # the first row of the comments right above
        comments_to = -1
        for child in children:
            start, end = max(child.start_point[0], covered + 1), last_row(child)
            if end < start:
                continue  # on a line already taken
            found = self.parsed.definition(child)
            if found is None:
                if child.type in COMMENTS:
                    if comments_from is None or start > comments_to + 1:
                        comments_from = start
                    comments_to = end
                else:
                    comments_from = _trailing_comments(child, start)
                    comments_to = end
                self._add_gap(pieces, start, end, trail)
                covered = end
                continue
            if comments_from is not None and comments_to >= start - 1 and pieces and not pieces[-1].definition:
                gap = pieces[-1]  # the comments leave the run of code and join the definition
                start = max(comments_from, gap.start)
                gap.end = start - 1
                if gap.end < gap.start:
                    pieces.pop()
            comments_from = None
            node, label = found
            pieces.extend(self._definition(node, label, start, end, trail))
            covered = end
        return pieces

    def capped(self, pieces: list[Piece]) -> list[Piece]:
        """Semantic pieces with every run of code (a gap between definitions, a class head)
        over the cap packed by whole lines; definitions were split along their syntax."""
        sizes = self.parsed.sizes
        out: list[Piece] = []
        for piece in pieces:
            if piece.text is None and not piece.definition and sizes(piece.start, piece.end) > self.cap:
                out.extend(pack_lines(sizes, piece.start, piece.end, piece.trail, self.cap))
            else:
                out.append(piece)
        return out

    def _add_gap(self, pieces: list[Piece], start: int, end: int, trail: tuple[str, ...]) -> None:
        if pieces and not pieces[-1].definition and pieces[-1].trail == trail:
            pieces[-1].end = end
        else:
            pieces.append(Piece(start, end, trail))

    def _definition(self, node: Node, label: str, start: int, end: int, trail: tuple[str, ...]) -> list[Piece]:
        inner_trail = (*trail, label)
        rules = self.parsed.rules
        body = rules.body(node) if node.type in rules.containers else None
        members = self.semantic(list(body.named_children), inner_trail) if body is not None else []
        if not any(p.definition for p in members):
            if self.parsed.sizes(start, end) > self.cap:
                # Too large to read whole: split along its syntax, as `bounded` does, every part
                # in the definition's context (and marked a definition, so nothing joins it).
                parts = bounded(self.parsed, segments(node, start, end), inner_trail, self.cap)
                for part in parts:
                    part.definition = True
                return parts or [Piece(start, end, inner_trail, definition=True)]
            return [Piece(start, end, inner_trail, definition=True)]
        # The head (signature, docstring, attributes) and the code between members keep the
        # container's trail; each member is a piece of its own.
        members = [p for p in members if p.end >= start]
        first = members[0]
        if first.definition:
            if first.start > start:
                members.insert(0, Piece(start, first.start - 1, inner_trail))
        else:
            first.start = start
        last = members[-1]
        if last.end < end:
            if last.definition:
                members.append(Piece(last.end + 1, end, inner_trail))
            else:
                last.end = end
        return members


def _trailing_comments(node: Node, start: int) -> int | None:
    """The first row of the comments a node ends with, on lines of their own (Kotlin's grammar
    puts the comment above a class into the package or import header before it)."""
    children = list(node.named_children)
    while children and children[-1].type not in COMMENTS:  # down the last child: import_list > import_header
        children = list(children[-1].named_children)
    count = 0
    while count < len(children) and children[-1 - count].type in COMMENTS:
        count += 1
    if count == 0:
        return None
    code_ends = max([last_row(c) for c in children[: len(children) - count]], default=start)
    first = children[-count].start_point[0]
    while first <= code_ends and count > 1:  # a comment on a line of code stays with the code
        count -= 1
        first = children[-count].start_point[0]
    return first if first > code_ends else None


def _in_place(children: list[Node], transparent: frozenset[str]) -> list[Node]:
    """The children, each transparent one (an include guard) replaced by its own children."""
    if not transparent or not any(child.type in transparent for child in children):
        return children
    out: list[Node] = []
    for child in children:
        if child.type in transparent:
            out.extend(_in_place(list(child.children), transparent))
        else:
            out.append(child)
    return out

"""Cutting source files into the chunks that a retriever ranks.

Three strategies, chosen per case variant:

- `line`: windows of `lines` lines that overlap by `overlap` lines, as they are.
- `semantic`: along the syntax tree (tree-sitter, through `tree-sitter-language-pack`): one
  chunk per function, class and method, one per run of code between them, comments directly
  above a definition kept with it. A class with methods gives a chunk for its head (signature,
  docstring, attributes) and one per method. Markdown is cut at its headings. Every chunk starts
  with a `[file: path]` line and, inside a definition or a section, a `[context: ...]` line such
  as `[context: class JSONDecoder > def decode]` or a heading trail `Install > From source`.
  Semantic chunks are capped too (`max_chars`, by default `SEMANTIC_CAP`): a definition larger
  than the cap is split along its syntax as `bounded` splits it, each part keeping the
  definition's context; a run of code or a section over the cap is packed by whole lines.
- `bounded`: split then merge, as in cAST: sibling syntax nodes are packed greedily into chunks
  of at most `max_chars` non-white-space characters, and a node too large for one chunk is split
  into its children, recursively, down to single lines (and a line too long for a chunk into
  pieces). No chunk's code exceeds the cap, so the cap can be set below a model's sequence limit.

Python, JavaScript, TypeScript (and TSX), Go, Rust, Java and C are parsed; other files fall
back to line windows (`semantic`) or capped line packing (`bounded`), with the file header.
Every chunk keeps its file's path and its 1-based, inclusive line range.

The defaults below are part of scoring: changing one means bumping the family's scoring version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragmatrix.families.code_retrieval.corpus import Corpus

BOUNDED_CAP = 400
# About 256 word pieces of code with its header: what MiniLM-sized models read (see
# docs/code_retrieval.md for the measurement).
SEMANTIC_CAP = 600


class Chunking(BaseModel):
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


@dataclass(frozen=True)
class Chunk:
    path: str
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    body: str  # the code of those lines (a piece of one line, for a line over the cap)
    context: str = ""  # "class X > def y", a markdown heading trail, or ""
    header: bool = True  # whether the file and context lines go before the code

    @property
    def text(self) -> str:
        """What is embedded and indexed."""
        if not self.header:
            return self.body
        head = f"[file: {self.path}]\n"
        if self.context:
            head += f"[context: {self.context}]\n"
        return head + self.body

    def overlaps(self, start: int, end: int) -> bool:
        return self.start <= end and start <= self.end


def chunk_corpus(corpus: Corpus, chunking: Chunking) -> list[Chunk]:
    """Every file's chunks, in the corpus's file order."""
    return [chunk for source in corpus.files for chunk in chunk_file(source.path, source.text, chunking)]


def chunk_file(path: str, text: str, chunking: Chunking) -> list[Chunk]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline at the end of the last line
    if chunking.strategy == "line":
        return line_chunks(path, lines, chunking.lines, chunking.overlap, header=False)
    language = language_of(path)
    if language == "markdown":
        return _markdown_chunks(path, lines, chunking)
    rules = RULES.get(language or "")
    tree = _parse(language, text) if rules is not None and language is not None else None
    if rules is None or tree is None:
        if chunking.strategy == "semantic":
            return line_chunks(path, lines, chunking.lines, chunking.overlap, header=True)
        return _to_chunks(path, lines, _pack_lines(_Sizes(lines), 0, len(lines) - 1, (), chunking.cap))
    walker = _Walker(rules, lines, text.encode("utf-8"), chunking.cap)
    root = tree.root_node
    if chunking.strategy == "semantic":
        pieces = walker.capped(walker.semantic(_named(root), ()))
    else:
        pieces = walker.bounded(_segments(root, 0, len(lines) - 1), (), chunking.cap)
    return _to_chunks(path, lines, pieces)


# --- line windows ------------------------------------------------------------------------------


def line_chunks(path: str, lines: list[str], size: int, overlap: int, header: bool) -> list[Chunk]:
    """Windows of `size` lines, each starting `size - overlap` lines after the one before; the
    last window ends at the end of the file. Windows of white space only are left out."""
    chunks: list[Chunk] = []
    step = size - overlap
    start = 0
    while start < len(lines):
        end = min(start + size, len(lines))
        body = "\n".join(lines[start:end])
        if body.strip():
            chunks.append(Chunk(path, start + 1, end, body, header=header))
        if end == len(lines):
            break
        start += step
    return chunks


# --- languages ---------------------------------------------------------------------------------

EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".md": "markdown",
    ".markdown": "markdown",
}


def language_of(path: str) -> str | None:
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot >= 0 else None


Node = Any  # a tree_sitter.Node


@dataclass(frozen=True)
class Rules:
    """What counts as a definition in a grammar, and how to name it."""

    definitions: dict[str, str]  # node type -> the word before its name: "def", "class", "fn"
    containers: frozenset[str] = frozenset()  # definitions whose bodies are cut into their members
    wrappers: frozenset[str] = frozenset()  # nodes that wrap one definition (decorators, export)
    namer: Callable[[Node, bytes], str] | None = None  # for definitions with no `name` field


COMMENTS = frozenset({"comment", "line_comment", "block_comment"})


def _text(node: Node | None, source: bytes) -> str:
    if node is None:
        return ""
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _field_name(node: Node, source: bytes) -> str:
    return " ".join(_text(node.child_by_field_name("name"), source).split())


def _go_name(node: Node, source: bytes) -> str:
    if node.type == "method_declaration":
        receiver = " ".join(_text(node.child_by_field_name("receiver"), source).split())
        return f"{receiver} {_field_name(node, source)}".strip()
    if node.type == "type_declaration":
        specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
        return ", ".join(_field_name(s, source) for s in specs)
    return _field_name(node, source)


def _rust_name(node: Node, source: bytes) -> str:
    if node.type == "impl_item":
        target = _text(node.child_by_field_name("type"), source)
        trait = _text(node.child_by_field_name("trait"), source)
        return f"{trait} for {target}" if trait else target
    return _field_name(node, source)


def _c_name(node: Node, source: bytes) -> str:
    if node.type in ("struct_specifier", "enum_specifier", "union_specifier"):
        return _field_name(node, source)
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in ("identifier", "type_identifier", "field_identifier"):
        declarator = declarator.child_by_field_name("declarator")
    return _text(declarator, source)


def _js_name(node: Node, source: bytes) -> str:
    if node.type in ("lexical_declaration", "variable_declaration"):
        declarator = next((c for c in node.named_children if c.type == "variable_declarator"), None)
        return _field_name(declarator, source) if declarator is not None else ""
    return _field_name(node, source)


_JS_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "class": "class",
    "method_definition": "method",
    "lexical_declaration": "function",  # only `const f = () => ...`: see _definition
    "variable_declaration": "function",
}
_TS_DEFINITIONS = {
    **_JS_DEFINITIONS,
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "abstract_method_signature": "method",
    "function_signature": "function",
    "internal_module": "namespace",
}
_JS_RULES = Rules(_JS_DEFINITIONS, frozenset({"class_declaration", "class"}), frozenset({"export_statement"}), _js_name)
_TS_RULES = Rules(
    _TS_DEFINITIONS,
    frozenset({"class_declaration", "class", "abstract_class_declaration", "internal_module"}),
    frozenset({"export_statement"}),
    _js_name,
)

RULES: dict[str, Rules] = {
    "python": Rules(
        {"function_definition": "def", "class_definition": "class"},
        frozenset({"class_definition"}),
        frozenset({"decorated_definition"}),
    ),
    "javascript": _JS_RULES,
    "typescript": _TS_RULES,
    "tsx": _TS_RULES,
    "go": Rules(
        {"function_declaration": "func", "method_declaration": "func", "type_declaration": "type"},
        namer=_go_name,
    ),
    "rust": Rules(
        {
            "function_item": "fn",
            "function_signature_item": "fn",
            "struct_item": "struct",
            "enum_item": "enum",
            "union_item": "union",
            "trait_item": "trait",
            "impl_item": "impl",
            "mod_item": "mod",
            "macro_definition": "macro_rules!",
        },
        frozenset({"impl_item", "trait_item", "mod_item"}),
        namer=_rust_name,
    ),
    "java": Rules(
        {
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "record",
            "annotation_type_declaration": "@interface",
            "method_declaration": "method",
            "constructor_declaration": "constructor",
        },
        frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}),
    ),
    "c": Rules(
        {
            "function_definition": "function",
            "struct_specifier": "struct",
            "enum_specifier": "enum",
            "union_specifier": "union",
            "type_definition": "typedef",
        },
        namer=_c_name,
    ),
}


@lru_cache(maxsize=16)
def _parser(language: str) -> Any:
    from tree_sitter_language_pack import get_parser

    return get_parser(language)  # type: ignore[arg-type]


def _parse(language: str, text: str) -> Any:
    try:
        return _parser(language).parse(text.encode("utf-8"))
    except (LookupError, ValueError):
        return None


def _last_row(node: Node) -> int:
    """The last line a node has text on: a node that ends at column 0 ends on the line before."""
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row


def _named(node: Node) -> list[Node]:
    return list(node.named_children)


# --- pieces: line ranges before they become chunks -----------------------------------------------


@dataclass
class _Piece:
    start: int  # 0-based rows, inclusive
    end: int
    trail: tuple[str, ...]  # the definitions (or headings) around it, outermost first
    definition: bool = False
    text: str | None = None  # a piece of a line, when one line is over the cap


def _to_chunks(path: str, lines: list[str], pieces: Iterable[_Piece]) -> list[Chunk]:
    chunks = []
    for piece in pieces:
        start, end = piece.start, piece.end
        if piece.text is None:  # blank lines at either end are left out of the range
            while start < end and not lines[start].strip():
                start += 1
            while end > start and not lines[end].strip():
                end -= 1
        body = piece.text if piece.text is not None else "\n".join(lines[start : end + 1])
        if re.search(r"\w", body):  # not blank lines or a lone closing brace
            chunks.append(Chunk(path, start + 1, end + 1, body, " > ".join(piece.trail)))
    return chunks


class _Sizes:
    """Non-white-space characters per line, summed for any range in constant time."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.prefix = [0]
        for line in lines:
            self.prefix.append(self.prefix[-1] + len(line) - sum(1 for c in line if c.isspace()))

    def __call__(self, start: int, end: int) -> int:
        return self.prefix[end + 1] - self.prefix[start]


def _pack_lines(sizes: _Sizes, start: int, end: int, trail: tuple[str, ...], cap: int) -> list[_Piece]:
    """Whole lines packed greedily up to the cap; a line over the cap alone is cut into pieces."""
    pieces: list[_Piece] = []
    first: int | None = None
    total = 0
    for row in range(start, end + 1):
        size = sizes(row, row)
        if first is not None and total + size > cap:
            pieces.append(_Piece(first, row - 1, trail))
            first, total = None, 0
        if size > cap:
            pieces.extend(_Piece(row, row, trail, text=part) for part in _cut_line(sizes.lines[row], cap))
            continue
        if first is None:
            first = row
        total += size
    if first is not None:
        pieces.append(_Piece(first, end, trail))
    return pieces


def _cut_line(line: str, cap: int) -> list[str]:
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


@dataclass
class _Segment:
    start: int
    end: int
    node: Node


def _segments(node: Node, first: int, last: int) -> list[_Segment]:
    """The node's children as consecutive line ranges that cover rows first..last: the lines
    before a child (blank lines, a shared line) go with it, the lines after the last child with
    that child. A child wholly on lines already taken joins the previous segment."""
    segments: list[_Segment] = []
    cursor = first
    for child in node.children:
        end = min(_last_row(child), last)
        if end < cursor:
            continue
        segments.append(_Segment(cursor, end, child))
        cursor = end + 1
    if segments and segments[-1].end < last:
        segments[-1].end = last
    return segments


@dataclass
class _Walker:
    rules: Rules
    lines: list[str]
    source: bytes
    cap: int
    sizes: _Sizes = field(init=False)

    def __post_init__(self) -> None:
        self.sizes = _Sizes(self.lines)

    def definition(self, node: Node) -> tuple[Node, str] | None:
        """The definition a node is or wraps, with its label ("class JSONDecoder")."""
        inner = node
        if node.type in self.rules.wrappers:
            inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
            if inner is None:
                inner = next((c for c in node.named_children if c.type in self.rules.definitions), None)
            if inner is None:
                return None
        word = self.rules.definitions.get(inner.type)
        if word is None:
            return None
        if inner.type in ("lexical_declaration", "variable_declaration") and not _holds_function(inner):
            return None
        if inner.type in ("struct_specifier", "enum_specifier", "union_specifier"):
            if inner.child_by_field_name("body") is None:
                return None  # a use of the type, not its definition
        name = (self.rules.namer or _field_name)(inner, self.source)
        return inner, f"{word} {name}".strip()

    # semantic -------------------------------------------------------------------------------

    def semantic(self, children: list[Node], trail: tuple[str, ...]) -> list[_Piece]:
        pieces: list[_Piece] = []
        covered = -1  # the last row already in a piece
        comments_from: int | None = None  # the first row of the comments right above
        comments_to = -1
        for child in children:
            start, end = max(child.start_point[0], covered + 1), _last_row(child)
            if end < start:
                continue  # on a line already taken
            found = self.definition(child)
            if found is None:
                if child.type in COMMENTS:
                    if comments_from is None or start > comments_to + 1:
                        comments_from = start
                    comments_to = end
                else:
                    comments_from = None
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

    def capped(self, pieces: list[_Piece]) -> list[_Piece]:
        """Semantic pieces with every run of code (a gap between definitions, a class head)
        over the cap packed by whole lines; definitions were split along their syntax."""
        out: list[_Piece] = []
        for piece in pieces:
            if piece.text is None and not piece.definition and self.sizes(piece.start, piece.end) > self.cap:
                out.extend(_pack_lines(self.sizes, piece.start, piece.end, piece.trail, self.cap))
            else:
                out.append(piece)
        return out

    def _add_gap(self, pieces: list[_Piece], start: int, end: int, trail: tuple[str, ...]) -> None:
        if pieces and not pieces[-1].definition and pieces[-1].trail == trail:
            pieces[-1].end = end
        else:
            pieces.append(_Piece(start, end, trail))

    def _definition(self, node: Node, label: str, start: int, end: int, trail: tuple[str, ...]) -> list[_Piece]:
        inner_trail = (*trail, label)
        body = node.child_by_field_name("body") if node.type in self.rules.containers else None
        members = self.semantic(_named(body), inner_trail) if body is not None else []
        if not any(p.definition for p in members):
            if self.sizes(start, end) > self.cap:
                # Too large to read whole: split along its syntax, as `bounded` does, every part
                # in the definition's context (and marked a definition, so nothing joins it).
                parts = self.bounded(_segments(node, start, end), inner_trail, self.cap)
                for part in parts:
                    part.definition = True
                return parts or [_Piece(start, end, inner_trail, definition=True)]
            return [_Piece(start, end, inner_trail, definition=True)]
        # The head (signature, docstring, attributes) and the code between members keep the
        # container's trail; each member is a piece of its own.
        members = [p for p in members if p.end >= start]
        first = members[0]
        if first.definition:
            if first.start > start:
                members.insert(0, _Piece(start, first.start - 1, inner_trail))
        else:
            first.start = start
        last = members[-1]
        if last.end < end:
            if last.definition:
                members.append(_Piece(last.end + 1, end, inner_trail))
            else:
                last.end = end
        return members

    # bounded --------------------------------------------------------------------------------

    def bounded(self, segments: list[_Segment], trail: tuple[str, ...], cap: int) -> list[_Piece]:
        """Split then merge: siblings packed greedily up to the cap, a sibling over the cap split
        into its own children first. Code just before a split part (a signature, a decorator)
        joins its first part, and small siblings after it join its last part, when they fit."""
        pieces: list[_Piece] = []
        current: _Piece | None = None  # the piece being filled
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

        for segment in segments:
            size = self.sizes(segment.start, segment.end)
            found = self.definition(segment.node)
            if size > cap:
                # A wrapper (decorators, export) names its definition one level down.
                named = found is not None and found[0] is segment.node
                inner_trail = (*trail, found[1]) if found is not None and named else trail
                parts = _segments(segment.node, segment.start, segment.end)
                if parts:
                    split = self.bounded(parts, inner_trail, cap)
                else:
                    split = _pack_lines(self.sizes, segment.start, segment.end, inner_trail, cap)
                first = split[0]
                if (
                    current is not None
                    and relabel
                    and not labels
                    and first.text is None
                    and (total + self.sizes(first.start, first.end) <= cap)
                ):
                    first.start = current.start
                    current, total = None, 0
                close()
                pieces.extend(split[:-1])
                last = split[-1]
                if last.text is None:
                    current, total, relabel = last, self.sizes(last.start, last.end), False
                else:
                    pieces.append(last)
                continue
            if current is not None and total + size > cap:
                close()
            if current is None:
                current = _Piece(segment.start, segment.end, trail)
            current.end = segment.end
            total += size
            if found is not None:
                labels.append(found[1])
        close()
        return pieces


def _holds_function(declaration: Node) -> bool:
    for declarator in declaration.named_children:
        if declarator.type == "variable_declarator":
            value = declarator.child_by_field_name("value")
            if value is not None and value.type in ("arrow_function", "function_expression", "function"):
                return True
    return False


# --- markdown ----------------------------------------------------------------------------------

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def markdown_sections(lines: list[str]) -> list[_Piece]:
    """One piece per heading, up to the next heading, with the trail of headings above it; the
    text before the first heading is a piece with no trail. Fenced code is not searched for
    headings."""
    pieces: list[_Piece] = []
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
            pieces.append(_Piece(start, row - 1, current))
        level = len(heading.group(1))
        trail = [(lvl, title) for lvl, title in trail if lvl < level] + [(level, heading.group(2).strip())]
        current = tuple(title for _, title in trail)
        start = row
    if start < len(lines):
        pieces.append(_Piece(start, len(lines) - 1, current))
    return pieces


def _markdown_chunks(path: str, lines: list[str], chunking: Chunking) -> list[Chunk]:
    sections = markdown_sections(lines)
    sizes = _Sizes(lines)
    capped: list[_Piece] = []
    for section in sections:
        if sizes(section.start, section.end) <= chunking.cap:
            capped.append(section)
        else:
            capped.extend(_pack_lines(sizes, section.start, section.end, section.trail, chunking.cap))
    sections = capped
    return _to_chunks(path, lines, sections)

"""The language table: which grammar parses a file, what counts as a definition in each
grammar and how it is named, and the parser lookup (tree-sitter, through
`tree-sitter-language-pack`, imported only when a file is parsed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ragmatrix.families.code_retrieval.chunking.pieces import Sizes

Node = Any  # a tree_sitter.Node

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


def extension_of(path: str) -> str:
    """The file's extension, lower case with its dot (`.rs`), or "" when it has none."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def language_of(path: str) -> str | None:
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot >= 0 else None


@dataclass(frozen=True)
class Rules:
    """What counts as a definition in a grammar, and how to name it."""

    definitions: dict[str, str]  # node type -> the word before its name: "def", "class", "fn"
    containers: frozenset[str] = frozenset()  # definitions whose bodies are cut into their members
    wrappers: frozenset[str] = frozenset()  # nodes that wrap one definition (decorators, export)
    namer: Callable[[Node, bytes], str] | None = None  # for definitions with no `name` field

    def definition(self, node: Node, source: bytes) -> tuple[Node, str] | None:
        """The definition a node is or wraps, with its label ("class JSONDecoder")."""
        inner = node
        if node.type in self.wrappers:
            inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
            if inner is None:
                inner = next((c for c in node.named_children if c.type in self.definitions), None)
            if inner is None:
                return None
        word = self.definitions.get(inner.type)
        if word is None:
            return None
        if inner.type in ("lexical_declaration", "variable_declaration") and not holds_function(inner):
            return None
        if inner.type in ("struct_specifier", "enum_specifier", "union_specifier"):
            if inner.child_by_field_name("body") is None:
                return None  # a use of the type, not its definition
        name = (self.namer or field_name)(inner, source)
        return inner, f"{word} {name}".strip()

    def body(self, node: Node) -> Node | None:
        """The node holding a container's members."""
        return node.child_by_field_name("body")


COMMENTS = frozenset({"comment", "line_comment", "block_comment"})


def node_text(node: Node | None, source: bytes) -> str:
    if node is None:
        return ""
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def field_name(node: Node, source: bytes) -> str:
    return " ".join(node_text(node.child_by_field_name("name"), source).split())


def holds_function(declaration: Node) -> bool:
    """Whether a JavaScript declaration binds a function (`const f = () => ...`)."""
    for declarator in declaration.named_children:
        if declarator.type == "variable_declarator":
            value = declarator.child_by_field_name("value")
            if value is not None and value.type in ("arrow_function", "function_expression", "function"):
                return True
    return False


def last_row(node: Node) -> int:
    """The last line a node has text on: a node that ends at column 0 ends on the line before."""
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row


def _go_name(node: Node, source: bytes) -> str:
    if node.type == "method_declaration":
        receiver = " ".join(node_text(node.child_by_field_name("receiver"), source).split())
        return f"{receiver} {field_name(node, source)}".strip()
    if node.type == "type_declaration":
        specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
        return ", ".join(field_name(s, source) for s in specs)
    return field_name(node, source)


def _rust_name(node: Node, source: bytes) -> str:
    if node.type == "impl_item":
        target = node_text(node.child_by_field_name("type"), source)
        trait = node_text(node.child_by_field_name("trait"), source)
        return f"{trait} for {target}" if trait else target
    return field_name(node, source)


def _c_name(node: Node, source: bytes) -> str:
    if node.type in ("struct_specifier", "enum_specifier", "union_specifier"):
        return field_name(node, source)
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in ("identifier", "type_identifier", "field_identifier"):
        declarator = declarator.child_by_field_name("declarator")
    return node_text(declarator, source)


def _js_name(node: Node, source: bytes) -> str:
    if node.type in ("lexical_declaration", "variable_declaration"):
        declarator = next((c for c in node.named_children if c.type == "variable_declarator"), None)
        return field_name(declarator, source) if declarator is not None else ""
    return field_name(node, source)


_JS_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "class": "class",
    "method_definition": "method",
    "lexical_declaration": "function",  # only `const f = () => ...`: see Rules.definition
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


def parse(language: str, text: str) -> Any:
    """The syntax tree of the text, or None when the grammar cannot be loaded."""
    try:
        return _parser(language).parse(text.encode("utf-8"))
    except (LookupError, ValueError):
        return None


@dataclass
class ParsedFile:
    """A file's lines and bytes with the rules of its grammar: what the syntax-aware
    strategies walk."""

    rules: Rules
    lines: list[str]
    source: bytes
    sizes: Sizes = field(init=False)

    def __post_init__(self) -> None:
        self.sizes = Sizes(self.lines)

    def definition(self, node: Node) -> tuple[Node, str] | None:
        return self.rules.definition(node, self.source)

"""The language table: which grammar parses a file, what counts as a definition in each
grammar and how it is named, and the parser lookup (tree-sitter, through
`tree-sitter-language-pack`, imported only when a file is parsed).

Every language of the Rust embedding benchmark's code list is parsed: Python, JavaScript,
TypeScript (and TSX), Go, Rust, Java, C, C++, Ruby, PHP, Swift, Kotlin and Scala, and the
configuration formats TOML (its tables are definitions), JSON and YAML (cut along their syntax,
with no definitions). A `.h` file is C++ when its text says so (`class`, `namespace`,
`template <`, `std::` ...), else C. A file no grammar parses is reported once per session and
extension (`NoGrammarWarning`), and is cut by lines.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ragmatrix.families.code_retrieval.chunking.pieces import Sizes
from ragmatrix.foundations.context import RunContext, current

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
    ".h": "c",  # or C++, by its text: see language_of
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".h++": "cpp",
    ".rb": "ruby",
    ".rake": "ruby",
    ".gemspec": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".sc": "scala",
    ".toml": "toml",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".md": "markdown",
    ".markdown": "markdown",
}

# What only C++ says: a class, a namespace, a template, an access specifier, the standard
# library's namespace or a header of it. A C header made usable from C++ (`extern "C"`) says
# none of these.
_CPP_MARKS = re.compile(
    r"^\s*(?:template\s*<|namespace\s+[\w:]*\s*\{|class\s+\w+[^;(]*[{:]|(?:public|private|protected)\s*:)"
    r"|\bstd::|\bnullptr\b|^\s*#\s*include\s*<(?:iostream|string|vector|memory|map|utility|cstdint|cstddef)>",
    re.MULTILINE,
)


def extension_of(path: str) -> str:
    """The file's extension, lower case with its dot (`.rs`), or "" when it has none."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def language_of(path: str, text: str | None = None) -> str | None:
    """The grammar of a file, by its extension; a `.h` file by its text too."""
    dot = path.rfind(".")
    language = EXTENSIONS.get(path[dot:].lower()) if dot >= 0 else None
    if language == "c" and path[dot:].lower() == ".h" and text is not None and _CPP_MARKS.search(text):
        return "cpp"
    return language


class NoGrammarWarning(UserWarning):
    """Files of a kind no grammar parses: they are cut by lines, not along their syntax."""


class Unparsed:
    """The kinds of file a run has said no grammar parses."""

    def __init__(self, run: RunContext) -> None:
        self.kinds: set[str] = set()


def report_no_grammar(path: str) -> None:
    """Say once per run and extension that files of this kind are not parsed."""
    kind = extension_of(path) or "(no extension)"
    reported = current().part(Unparsed).kinds
    if kind in reported:
        return
    reported.add(kind)
    warnings.warn(
        NoGrammarWarning(
            f"code retrieval: no grammar parses {kind} files ({path} is the first): they are cut by lines, "
            "not along their syntax"
        ),
        stacklevel=3,
    )


@dataclass(frozen=True)
class Rules:
    """What counts as a definition in a grammar, and how to name it."""

    definitions: dict[str, str]  # node type -> the word before its name: "def", "class", "fn"
    containers: frozenset[str] = frozenset()  # definitions whose bodies are cut into their members
    wrappers: frozenset[str] = frozenset()  # nodes that wrap one definition (decorators, export)
    namer: Callable[[Node, bytes], str] | None = None  # for definitions with no `name` field
    # Definitions that count only with a body (C's `struct point` names a type it does not define).
    needs_body: frozenset[str] = frozenset()
    # The word before the name where the node's type does not tell it (Swift's `struct`).
    kind: Callable[[Node, bytes], str] | None = None
    # The node holding a container's members, for a grammar with no `body` field (Kotlin).
    members: Callable[[Node], Node | None] | None = None
    # Text that alone only closes a definition (Ruby's `end`): it is no chunk of its own.
    closing: re.Pattern[str] | None = None
    # Nodes whose children are walked as if they stood in their place (C's `#ifndef` guards).
    transparent: frozenset[str] = frozenset()

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
        if word is None or not inner.is_named:  # Ruby's keyword `class` is no class
            return None
        if inner.type in ("lexical_declaration", "variable_declaration") and not holds_function(inner):
            return None
        if inner.type in self.needs_body and self.body(inner) is None:
            return None  # a use of the type, not its definition
        if self.kind is not None:
            word = self.kind(inner, source) or word
        name = (self.namer or field_name)(inner, source)
        return inner, f"{word} {name}".strip()

    def body(self, node: Node) -> Node | None:
        """The node holding a container's members."""
        if self.members is not None:
            return self.members(node)
        return node.child_by_field_name("body")


COMMENTS = frozenset({"comment", "line_comment", "block_comment", "multiline_comment"})


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


# An include guard, a conditional or `extern "C" { ... }`: a header's definitions are inside one.
_BLOCKS = frozenset(
    {
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "linkage_specification",
        "declaration_list",  # the body of `extern "C" {`
    }
)

_CPP_NAMES = frozenset(
    {
        "identifier",
        "type_identifier",
        "field_identifier",
        "qualified_identifier",
        "destructor_name",
        "operator_name",
        "template_function",
    }
)


def _cpp_name(node: Node, source: bytes) -> str:
    if node.type != "function_definition":
        return field_name(node, source)  # a class, a struct, a namespace (an anonymous one: "")
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in _CPP_NAMES:
        declarator = declarator.child_by_field_name("declarator")
    return " ".join(node_text(declarator, source).split())


def _ruby_name(node: Node, source: bytes) -> str:
    if node.type == "singleton_method":
        owner = node_text(node.child_by_field_name("object"), source)
        return f"{owner}.{field_name(node, source)}"
    if node.type == "singleton_class":
        return node_text(node.child_by_field_name("value"), source)
    return field_name(node, source)


def _first_child(node: Node, types: tuple[str, ...]) -> Node | None:
    return next((c for c in node.named_children if c.type in types), None)


def _kotlin_name(node: Node, source: bytes) -> str:
    if node.type in ("function_declaration", "secondary_constructor"):
        return node_text(_first_child(node, ("simple_identifier",)), source)
    return node_text(_first_child(node, ("type_identifier",)), source)


def _kotlin_kind(node: Node, source: bytes) -> str:
    if node.type != "class_declaration":
        return ""
    words = {c.type for c in node.children if not c.is_named}
    if "interface" in words:
        return "interface"
    return "enum class" if "enum" in words else "class"


def _swift_kind(node: Node, source: bytes) -> str:
    return node_text(node.child_by_field_name("declaration_kind"), source)


def _swift_name(node: Node, source: bytes) -> str:
    if node.type in ("init_declaration", "deinit_declaration"):
        return ""  # the word says it all: `init`
    return field_name(node, source)


def _toml_name(node: Node, source: bytes) -> str:
    key = node_text(_first_child(node, ("bare_key", "dotted_key", "quoted_key")), source)
    return f"[[{key}]]" if node.type == "table_array_element" else f"[{key}]"


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
        needs_body=frozenset({"struct_specifier", "enum_specifier", "union_specifier"}),
        namer=_c_name,
        transparent=_BLOCKS,
    ),
    "cpp": Rules(
        {
            "function_definition": "function",
            "class_specifier": "class",
            "struct_specifier": "struct",
            "union_specifier": "union",
            "enum_specifier": "enum",
            "namespace_definition": "namespace",
            "type_definition": "typedef",
            "alias_declaration": "using",
            "concept_definition": "concept",
        },
        frozenset({"class_specifier", "struct_specifier", "union_specifier", "namespace_definition"}),
        frozenset({"template_declaration"}),
        namer=_cpp_name,
        transparent=_BLOCKS,
        needs_body=frozenset({"class_specifier", "struct_specifier", "enum_specifier", "union_specifier"}),
    ),
    "ruby": Rules(
        {
            "class": "class",
            "module": "module",
            "singleton_class": "class <<",
            "method": "def",
            "singleton_method": "def",
        },
        frozenset({"class", "module", "singleton_class"}),
        namer=_ruby_name,
        closing=re.compile(r"\s*(?:end\b[\s;]*)+"),
    ),
    "php": Rules(
        {
            "namespace_definition": "namespace",
            "class_declaration": "class",
            "interface_declaration": "interface",
            "trait_declaration": "trait",
            "enum_declaration": "enum",
            "function_definition": "function",
            "method_declaration": "function",
        },
        frozenset(
            {
                "namespace_definition",
                "class_declaration",
                "interface_declaration",
                "trait_declaration",
                "enum_declaration",
            }
        ),
        needs_body=frozenset({"namespace_definition"}),  # `namespace App;` names, it holds nothing
    ),
    "swift": Rules(
        {
            "class_declaration": "class",  # or struct, enum, extension, actor: see kind
            "protocol_declaration": "protocol",
            "function_declaration": "func",
            "protocol_function_declaration": "func",
            "init_declaration": "init",
            "deinit_declaration": "deinit",
            "subscript_declaration": "subscript",
            "typealias_declaration": "typealias",
        },
        frozenset({"class_declaration", "protocol_declaration"}),
        namer=_swift_name,
        kind=_swift_kind,
    ),
    "kotlin": Rules(
        {
            "class_declaration": "class",  # or interface, enum class: see kind
            "object_declaration": "object",
            "companion_object": "companion object",
            "function_declaration": "fun",
            "secondary_constructor": "constructor",
            "type_alias": "typealias",
        },
        frozenset({"class_declaration", "object_declaration", "companion_object"}),
        namer=_kotlin_name,
        kind=_kotlin_kind,
        members=lambda node: _first_child(node, ("class_body", "enum_class_body")),
    ),
    "scala": Rules(
        {
            "class_definition": "class",
            "object_definition": "object",
            "trait_definition": "trait",
            "enum_definition": "enum",
            "function_definition": "def",
            "function_declaration": "def",
            "given_definition": "given",
            "type_definition": "type",
        },
        frozenset({"class_definition", "object_definition", "trait_definition", "enum_definition"}),
    ),
    "toml": Rules({"table": "", "table_array_element": ""}, namer=_toml_name),
    # Data: no definitions, but `bounded` splits them along their syntax, and semantic chunks
    # are packed by whole lines under the cap.
    "json": Rules({}),
    "yaml": Rules({}),
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

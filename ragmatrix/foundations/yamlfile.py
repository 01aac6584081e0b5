"""Reading the YAML files a benchmark is made of (data files, models.yaml), strictly.

PyYAML's safe loader keeps the last of two equal keys without a word: a second `case:` line
renames a case, a repeated variant name drops a variant, and `yes:` beside `True:` (the same
boolean to YAML 1.1) loses one of them. The loader here refuses a repeated key. Bytes that are
not UTF-8, syntax errors and aliases that expand without bound come back as `YamlFileError`,
whose message is one line without the file name (the caller names the file its own way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ragmatrix.foundations.regular_file import read_regular

# libyaml's parser when PyYAML was built with it: every run, cached ones included, parses
# every data file, and the pure-Python parser is several times slower. Construction (where
# keys are checked) is Python either way.
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
# How many values a document may hold once its aliases are expanded: far above any real file
# (the shipped ones hold a few thousand), far below what exhausts memory when a case's content
# is serialised for its key ("billion laughs": a 1 kB file of nested aliases).
MAX_EXPANDED_VALUES = 1_000_000


class YamlFileError(Exception):
    """The file cannot be read as YAML; the message is one line, e.g. `line 3: ...`."""


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping gives a key it already has."""


class StrictLoader(_BASE_LOADER):  # type: ignore[misc]
    """The safe loader, refusing a key that a mapping already has."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue  # `<<: *anchor` may be overridden by the mapping's own keys
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # an unhashable key: the base class says so
                if first is not key_node:
                    raise DuplicateKeyError(None, None, _duplicate(key_node, first), key_node.start_mark)
        return dict(super().construct_mapping(node, deep=deep))


def _duplicate(key_node: yaml.Node, first: yaml.Node) -> str:
    line = first.start_mark.line + 1
    if key_node.value == first.value:
        return f"duplicate key '{key_node.value}' (first on line {line})"
    return f"duplicate key '{key_node.value}' (line {line} has '{first.value}', the same key to YAML)"


def read_yaml(path: Path) -> Any:
    """The document in the file. Raises OSError when it cannot be read, YamlFileError when it
    is not UTF-8, not YAML, repeats a key or expands past MAX_EXPANDED_VALUES; a FIFO or a
    device by that name is refused as an OSError (`NotRegularFile`), never read."""
    data = read_regular(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise YamlFileError(
            f"line {line}: not UTF-8 text (byte 0x{data[error.start]:02x} at byte offset {error.start}); "
            "save the file as UTF-8"
        ) from None
    try:
        document = yaml.load(text, Loader=StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        reason = error.problem or error.context or str(error).splitlines()[0]
        kind = "" if isinstance(error, DuplicateKeyError) else "YAML syntax error: "
        raise YamlFileError(f"{where}{kind}{reason}") from None
    except yaml.reader.ReaderError as error:  # a control character: valid UTF-8, but not YAML
        offset = error.position if _BASE_LOADER is not yaml.SafeLoader else len(text[: error.position].encode())
        code = error.character if isinstance(error.character, int) else ord(error.character)
        line = data.count(b"\n", 0, offset) + 1
        raise YamlFileError(
            f"line {line}: YAML allows no character #x{code:04x} (byte offset {offset}; {error.reason})"
        ) from None
    except yaml.YAMLError as error:
        raise YamlFileError(f"YAML syntax error: {str(error).splitlines()[0]}") from None
    except RecursionError:
        raise YamlFileError("YAML nested too deeply to read") from None
    # Only aliases can make a document larger than its text: count when there are anchors.
    if "&" in text and "*" in text:
        size = expanded_size(document, MAX_EXPANDED_VALUES)
        if size > MAX_EXPANDED_VALUES:
            raise YamlFileError(
                f"its aliases (*name) expand to more than {MAX_EXPANDED_VALUES:,} values; "
                "an alias inside an alias multiplies"
            )
    return document


def expanded_size(document: Any, limit: int) -> int:
    """How many values the document holds with every alias written out (each shared object
    counted once per place it appears), at most `limit + 1`. Walks each shared object once, so
    a nest of aliases costs its text's size, not its expansion's; a cycle counts as too many."""
    sizes: dict[int, int] = {}
    counting: set[int] = set()  # objects whose children are being counted: met again, a cycle

    def size(value: Any) -> int:
        ident = id(value)
        known = sizes.get(ident)
        if known is not None:
            return known
        if ident in counting:
            return limit + 1  # an alias inside its own anchor never ends
        counting.add(ident)
        total, children = (1 + len(value), value.values()) if type(value) is dict else (1, value)
        for child in children:
            total += size(child) if type(child) in (dict, list) else 1
            if total > limit:
                total = limit + 1
                break
        counting.discard(ident)
        sizes[ident] = total
        return total

    return size(document) if type(document) in (dict, list) else 1


def field_errors(error: ValidationError) -> list[tuple[list[str], str]]:
    """Each of pydantic's errors as (field path, message), the message without its URL."""
    found = []
    for item in error.errors():
        message = "missing field" if item["type"] == "missing" else item["msg"]
        found.append(([str(part) for part in item["loc"]], message))
    return found


def error_line(path: list[str], message: str) -> str:
    """`input.fragments.0: message`. A check of a whole object has no path: its message
    names the fields itself."""
    return f"{'.'.join(path)}: {message}" if path else message

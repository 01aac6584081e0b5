"""YAML text to a document, strictly: the parser behind `yamlfile`, imported only where a file
is parsed (PyYAML's import is about 10 ms, paid by no run whose files are remembered).

PyYAML's safe loader keeps the last of two equal keys without a word: a second `case:` line
renames a case, a repeated variant name drops a variant, and `yes:` beside `True:` (the same
boolean to YAML 1.1) loses one of them. The loader here refuses a repeated key. Bytes that are
not UTF-8, syntax errors and aliases that expand without bound come back as `NotYaml`, whose
message is one line without the file name.
"""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's parser when PyYAML was built with it: the pure-Python parser is several times
# slower on a large data file. Construction (where keys are checked) is Python either way.
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class NotYaml(ValueError):
    """The bytes are not a document this parser accepts; the message is one line, e.g. `line 3: ...`."""


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


def parse(data: bytes, max_values: int) -> Any:
    """The document the bytes hold. Raises NotYaml when they are not UTF-8, not YAML, repeat a
    key, or hold aliases that expand past `max_values` values."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise NotYaml(
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
        raise NotYaml(f"{where}{kind}{reason}") from None
    except yaml.reader.ReaderError as error:  # a control character: valid UTF-8, but not YAML
        offset = error.position if _BASE_LOADER is not yaml.SafeLoader else len(text[: error.position].encode())
        code = error.character if isinstance(error.character, int) else ord(error.character)
        line = data.count(b"\n", 0, offset) + 1
        raise NotYaml(
            f"line {line}: YAML allows no character #x{code:04x} (byte offset {offset}; {error.reason})"
        ) from None
    except yaml.YAMLError as error:
        raise NotYaml(f"YAML syntax error: {str(error).splitlines()[0]}") from None
    except RecursionError:
        raise NotYaml("YAML nested too deeply to read") from None
    # Only aliases can make a document larger than its text: count when there are anchors.
    if "&" in text and "*" in text:
        size = expanded_size(document, max_values)
        if size > max_values:
            raise NotYaml(
                f"its aliases (*name) expand to more than {max_values:,} values; an alias inside an alias multiplies"
            )
    return document


def expanded_size(document: Any, limit: int) -> int:
    """How many values the document holds with every alias written out (each shared object
    counted once per place it appears), at most `limit + 1`. Walks each shared object once, so
    a nest of aliases costs its text's size, not its expansion's; a cycle counts as too many."""
    return _ExpandedSize(limit).of(document) if type(document) in (dict, list) else 1


class _ExpandedSize:
    """One document's count. A class rather than a closure that calls itself: such a closure
    reaches itself through its cell, a reference cycle that would keep the table of every
    mapping and list until the cyclic garbage collector ran, and that collector is paused
    while the data files are read at collection."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sizes: dict[int, int] = {}
        self.counting: set[int] = set()  # objects whose children are being counted: met again, a cycle

    def of(self, value: Any) -> int:
        ident = id(value)
        known = self.sizes.get(ident)
        if known is not None:
            return known
        limit = self.limit
        if ident in self.counting:
            return limit + 1  # an alias inside its own anchor never ends
        self.counting.add(ident)
        total, children = (1 + len(value), value.values()) if type(value) is dict else (1, value)
        for child in children:
            total += self.of(child) if type(child) in (dict, list) else 1
            if total > limit:
                total = limit + 1
                break
        self.counting.discard(ident)
        self.sizes[ident] = total
        return total

"""Reading the YAML files a benchmark is made of (data files, models.yaml), strictly.

PyYAML's safe loader keeps the last of two equal keys without a word: a second `case:` line
renames a case, a repeated variant name drops a variant, and `yes:` beside `True:` (the same
boolean to YAML 1.1) loses one of them. The loader here refuses a repeated key. Bytes that are
not UTF-8, syntax errors and aliases that expand without bound come back as `YamlFileError`,
whose message is one line without the file name (the caller names the file its own way).

A data file read once is remembered (`read_yaml(path, remember=True)`): its document is kept
under the run's cache folder in marshal's form, beside the digest of the bytes it was read
from, and a later run whose file holds the same bytes loads it from there instead of parsing
YAML again (a tenth of the time on a file of 10,000 cases). Only a document that passed every
check above is remembered, so the checks hold for the remembered one too; a file edited since,
a remembered copy that is damaged, or a document marshal cannot hold (a timestamp) is parsed.
"""

from __future__ import annotations

import hashlib
import marshal
import os
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


def read_yaml(path: Path, remember: bool = False) -> Any:
    """The document in the file. Raises OSError when it cannot be read, YamlFileError when it
    is not UTF-8, not YAML, repeats a key or expands past MAX_EXPANDED_VALUES; a FIFO or a
    device by that name is refused as an OSError (`NotRegularFile`), never read. `remember`: load
    it from the run's cache folder when the file's bytes were read before, and keep it there."""
    data = read_regular(path)
    if not remember:
        return _parsed(data)
    copy = _Remembered(path, data)
    document = copy.load()
    if document is _NOT_FOUND:
        document = _parsed(data)
        copy.keep(document)
    return document


def _parsed(data: bytes) -> Any:
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


# Bump when the checks above change what a file gives: remembered documents are then read again.
CHECKS_VERSION = 1
DOCUMENTS_FOLDER = "documents"  # under the run's cache folder
_HEADER = b"ragmatrix remembered YAML document\n"
_NOT_FOUND = object()


class _Remembered:
    """A data file's document as kept in the cache folder: one file per data file, holding the
    digest of the bytes it was read from, the digest of what follows, and the marshalled
    document (marshal keeps the objects that aliases share shared)."""

    def __init__(self, path: Path, data: bytes) -> None:
        from ragmatrix.foundations.cache import cache_dir

        name = hashlib.blake2b(os.path.abspath(path).encode(), digest_size=16).hexdigest()
        self.path = cache_dir() / DOCUMENTS_FOLDER / f"{name}.marshal"
        read_as = f"{CHECKS_VERSION}:{yaml.__version__}:{MAX_EXPANDED_VALUES}:".encode()
        self.source = hashlib.blake2b(read_as + data, digest_size=32).digest()

    def load(self) -> Any:
        try:
            kept = self.path.read_bytes()
        except OSError:
            return _NOT_FOUND
        start = len(_HEADER) + 64
        if kept[: len(_HEADER)] != _HEADER or kept[len(_HEADER) : len(_HEADER) + 32] != self.source:
            return _NOT_FOUND  # another version of the file, or none
        payload = kept[start:]
        if hashlib.blake2b(payload, digest_size=32).digest() != kept[len(_HEADER) + 32 : start]:
            return _NOT_FOUND  # damaged: read the file again
        try:
            return marshal.loads(payload)
        except (EOFError, ValueError, TypeError):
            return _NOT_FOUND

    def keep(self, document: Any) -> None:
        """Best effort: a cache folder that refuses writes only means parsing next time."""
        try:
            payload = marshal.dumps(document)
        except ValueError:  # a value marshal cannot write (a timestamp): parsed every time
            return
        digest = hashlib.blake2b(payload, digest_size=32).digest()
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_bytes(_HEADER + self.source + digest + payload)
            os.replace(partial, self.path)
        except OSError:
            try:
                partial.unlink(missing_ok=True)
            except OSError:
                pass


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

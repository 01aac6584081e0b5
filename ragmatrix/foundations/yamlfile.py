"""Reading the YAML files a benchmark is made of (data files, models.yaml), strictly.

The parser (`yaml_syntax`) refuses a repeated key, which PyYAML's safe loader would let pass.
Bytes that are not UTF-8, syntax errors and aliases that expand without bound come back as
`YamlFileError`, whose message is one line without the file name (the caller names the file
its own way).

A file read once is remembered (`read_yaml(path, remember=True)`): its document is kept under
the run's cache folder in marshal's form, beside the digest of the bytes it was read from, and
a later run whose file holds the same bytes loads it from there instead of parsing YAML again
(a tenth of the time on a file of 10,000 cases). Such a run does not import PyYAML at all.
Only a document that passed every check is remembered, so the checks hold for the remembered
one too; a file edited since, a remembered copy that is damaged, another PyYAML, or a document
marshal cannot hold (a timestamp) is parsed.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragmatrix.foundations.installs import install_stamp
from ragmatrix.foundations.regular_file import read_regular

# How many values a document may hold once its aliases are expanded: far above any real file
# (the shipped ones hold a few thousand), far below what exhausts memory when a case's content
# is serialised for its key ("billion laughs": a 1 kB file of nested aliases).
MAX_EXPANDED_VALUES = 1_000_000


class YamlFileError(Exception):
    """The file cannot be read as YAML; the message is one line, e.g. `line 3: ...`."""


def read_yaml(path: Path, remember: bool | Callable[[bytes], bool] = False) -> Any:
    """The document in the file. Raises OSError when it cannot be read, YamlFileError when it
    is not UTF-8, not YAML, repeats a key or expands past MAX_EXPANDED_VALUES; a FIFO or a
    device by that name is refused as an OSError (`NotRegularFile`), never read. `remember`: load
    it from the run's cache folder when the file's bytes were read before, and keep it there; or
    a test of the file's bytes, saying whether they may be kept there (a models.yaml that holds
    a password may not)."""
    data = read_regular(path)
    if not remember or (callable(remember) and not remember(data)):
        return _parsed(data)
    copy = _Remembered(path, data)
    document = copy.load()
    if document is _NOT_FOUND:
        document = _parsed(data)
        copy.keep(document)
    return document


def _parsed(data: bytes) -> Any:
    from ragmatrix.foundations.yaml_syntax import NotYaml, parse  # PyYAML: only where a file is parsed

    try:
        return parse(data, MAX_EXPANDED_VALUES)
    except NotYaml as problem:
        raise YamlFileError(str(problem)) from None


# Bump when the parser's checks (`yaml_syntax`) change what a file gives: remembered documents
# are then read again.
CHECKS_VERSION = 1
DOCUMENTS_FOLDER = "documents"  # under the run's cache folder
_HEADER = b"ragmatrix remembered YAML document\n"
_NOT_FOUND = object()


def _parser_install() -> str:
    """PyYAML's install, named without importing it (`install_stamp`)."""
    return install_stamp("yaml") or "no PyYAML"  # parsing will say so


class _Remembered:
    """A data file's document as kept in the cache folder: one file per data file, holding the
    digest of the bytes it was read from, the digest of what follows, and the marshalled
    document (marshal keeps the objects that aliases share shared)."""

    def __init__(self, path: Path, data: bytes) -> None:
        from ragmatrix.foundations.cache import cache_dir

        name = hashlib.blake2b(os.path.abspath(path).encode(), digest_size=16).hexdigest()
        self.path = cache_dir() / DOCUMENTS_FOLDER / f"{name}.marshal"
        read_as = f"{CHECKS_VERSION}:{_parser_install()}:{MAX_EXPANDED_VALUES}:".encode()
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

"""Where probe texts come from: a built-in source, local parquet or jsonl files, or an HF dataset.

A source is a list of rows, each an ordered list of atomic chunks: a string column gives one
chunk per row, a list-valued column (Finesse's `beads`) its chunks in order. `group_by` joins the
rows that share a field's value (Finesse's `string_id`) into one, in row order. A document is a
row's chunks joined by spaces. Each source has a fingerprint that goes into the result key, so
changed text means new results; it is cheap to compute (file bytes, never parsed), because it
is computed for every item at collection, cached runs included.

Every problem a user can cause (a missing file, a missing column, an empty source, a dataset
that cannot be loaded) raises `CaseInputError` with one line.
"""

from __future__ import annotations

import glob
import hashlib
import sysconfig
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, model_validator

from ragmatrix.foundations.data_model import DataModel
from ragmatrix.foundations.keys import canonical_json, md5_of
from ragmatrix.seam.case import CaseInputError

# Bump when the built-in extraction changes: its fingerprint changes with it.
BUILTIN_VERSION = 1
# A module docstring shorter than this is a one-liner, not a document.
MIN_DOCSTRING_WORDS = 40


class TextSource(DataModel):
    """One of `builtin`, `files` or `hf`.

    - `builtin: python-docs`: Python's own reference topics (`pydoc_data.topics`) plus the
      docstrings of the standard library's top-level modules. Real prose, present offline.
    - `files: [a.jsonl, more/*.parquet]`: local files, relative to the data file; read with
      `datasets` (json for .json/.jsonl, parquet for .parquet).
    - `hf: <dataset path>`: anything `datasets.load_dataset` accepts, a hub name or a local
      dataset folder, with `config`, `split` and `revision`.
    """

    model_config = ConfigDict(extra="forbid")

    builtin: Literal["python-docs"] | None = None
    files: list[str] | None = None
    hf: str | None = None
    config: str | None = None
    split: str = "train"
    revision: str | None = None
    text_field: str = "text"  # strings, or lists of strings (atomic chunks, in order)
    group_by: str | None = None  # rows with the same value of this field form one document

    @model_validator(mode="after")
    def one_kind(self) -> TextSource:
        kinds = [k for k in ("builtin", "files", "hf") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("give exactly one of builtin, files, hf")
        return self

    @property
    def label(self) -> str:
        if self.builtin:
            return f"builtin source '{self.builtin}'"
        if self.files:
            return f"files {', '.join(self.files)}"
        return f"dataset '{self.hf}'"


def source_fingerprint(source: TextSource, directory: Path) -> str:
    return _fingerprint(canonical_json(source.model_dump()), str(directory), _stamp(source, directory))


def load_rows(source: TextSource, directory: Path) -> list[tuple[str, ...]]:
    """Every row (or group) of the source as its chunks, in file order, empty ones included:
    a procedure that shuffles row positions (Finesse's) must see the rows as they are."""
    rows = _rows(canonical_json(source.model_dump()), str(directory), source_fingerprint(source, directory))
    if not any(" ".join(row).strip() for row in rows):
        raise CaseInputError(f"{source.label}: no documents (empty source)")
    return list(rows)


def load_documents(source: TextSource, directory: Path) -> list[str]:
    """The source's non-empty documents, read once per process and version of its files."""
    return [text for text in (" ".join(row) for row in load_rows(source, directory)) if text.strip()]


def _stamp(source: TextSource, directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Size and mtime of the local files a source reads: they key the in-process memos, so an
    edited file is read and hashed again (the built-in source is fixed for a process)."""
    if source.files:
        files = [f for pattern in source.files for f in _matches(pattern, directory)]
    elif source.hf and Path(directory, source.hf).is_dir():
        files = sorted(p for p in Path(directory, source.hf).rglob("*") if p.is_file())
    else:
        return ()
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


@lru_cache(maxsize=32)
def _fingerprint(source_json: str, directory: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    source = TextSource.model_validate_json(source_json)
    if source.builtin:
        files = _python_docs_files()
        return md5_of({"builtin": source.builtin, "version": BUILTIN_VERSION, "files": _hash_files(files)})
    grouped = {"group_by": source.group_by} if source.group_by else {}  # absent: older keys stay
    if source.files:
        hashed = _hash_files(_local_files(source, Path(directory)))
        return md5_of({"files": hashed, "field": source.text_field, **grouped})
    assert source.hf is not None
    local = Path(directory, source.hf)
    if local.is_dir():  # a dataset folder on disk: its files are the content
        files = sorted(p for p in local.rglob("*") if p.is_file())
        return md5_of({"hf_folder": _hash_files(files, base=local), **_hf_settings(source), **grouped})
    # A hub dataset cannot be hashed without downloading it: pin `revision` for stable keys.
    return md5_of({"hf": source.hf, **_hf_settings(source), **grouped})


def _hf_settings(source: TextSource) -> dict[str, str | None]:
    return {"config": source.config, "split": source.split, "revision": source.revision, "field": source.text_field}


def _hash_files(files: list[Path], base: Path | None = None) -> list[tuple[str, str]]:
    def name(path: Path) -> str:
        return path.relative_to(base).as_posix() if base is not None else path.name

    return [(name(p), hashlib.md5(p.read_bytes()).hexdigest()) for p in files]


@lru_cache(maxsize=8)
def _rows(source_json: str, directory: str, fingerprint: str) -> tuple[tuple[str, ...], ...]:
    source = TextSource.model_validate_json(source_json)
    if source.builtin:
        return tuple((document,) for document in _python_docs())
    if source.files:
        return tuple(_read_files(source, Path(directory)))
    return tuple(_read_hf(source, Path(directory)))


def _matches(pattern: str, directory: Path) -> list[Path]:
    path = Path(pattern).expanduser()
    path = path if path.is_absolute() else directory / path
    matches = sorted(Path(p) for p in glob.glob(str(path))) if glob.has_magic(pattern) else [path]
    return [m for m in matches if m.is_file()]


def _local_files(source: TextSource, directory: Path) -> list[Path]:
    files: list[Path] = []
    for pattern in source.files or []:
        existing = _matches(pattern, directory)
        if not existing:
            raise CaseInputError(f"text source file {pattern} not found")
        files.extend(existing)
    return files


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        return "json"
    if suffix == ".parquet":
        return "parquet"
    raise CaseInputError(f"text source file {path.name}: unknown format (use .jsonl, .json or .parquet)")


def _read_files(source: TextSource, directory: Path) -> list[tuple[str, ...]]:
    files = _local_files(source, directory)
    formats = {_format_of(f) for f in files}
    if len(formats) > 1:
        raise CaseInputError(f"{source.label}: mixes jsonl and parquet files; give one format per source")
    from datasets import load_dataset

    try:
        dataset = load_dataset(formats.pop(), data_files=[str(f) for f in files], split="train")
    except Exception as error:
        raise CaseInputError(f"{source.label}: cannot read: {_first_line(error)}") from None
    return _column(dataset, source)


def _read_hf(source: TextSource, directory: Path) -> list[tuple[str, ...]]:
    from datasets import load_dataset

    local = Path(directory, source.hf or "")
    path = str(local) if local.is_dir() else str(source.hf)
    try:
        dataset = load_dataset(path, source.config, split=source.split, revision=source.revision)
    except Exception as error:
        raise CaseInputError(f"{source.label}: cannot load: {_first_line(error)}") from None
    return _column(dataset, source)


def _column(dataset: object, source: TextSource) -> list[tuple[str, ...]]:
    """Each row's chunks; with `group_by`, each group's, in order of first appearance."""
    columns = list(getattr(dataset, "column_names", []) or [])
    for name in (source.text_field, source.group_by):
        if name is not None and name not in columns:
            raise CaseInputError(f"{source.label}: no column '{name}' (columns: {', '.join(columns) or 'none'})")
    rows = [_chunks(value, index, source) for index, value in enumerate(dataset[source.text_field])]  # type: ignore[index]
    if source.group_by is None:
        return rows
    groups: dict[str, list[str]] = {}
    for index, (key, chunks) in enumerate(zip(dataset[source.group_by], rows, strict=True)):  # type: ignore[index]
        if key is None:
            raise CaseInputError(f"{source.label}: row {index + 1} has no '{source.group_by}' to group by")
        groups.setdefault(str(key), []).extend(chunks)
    return [tuple(chunks) for chunks in groups.values()]


def _chunks(value: object, index: int, source: TextSource) -> tuple[str, ...]:
    """A cell of the text column as atomic chunks: a string is one, a list of strings is its
    elements in order, a missing value none. Anything else is an error, never its repr."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    kind = (
        f"a list holding {type(next(i for i in value if not isinstance(i, str))).__name__}"
        if isinstance(value, list)
        else type(value).__name__
    )
    raise CaseInputError(
        f"{source.label}: column '{source.text_field}' row {index + 1} holds {kind}; "
        "a text column holds strings or lists of strings"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _python_docs_files() -> list[Path]:
    import pydoc_data.topics

    return [Path(pydoc_data.topics.__file__), *sorted(_stdlib().glob("*.py"))]


def _python_docs() -> list[str]:
    """Reference topics, then module docstrings, in a fixed order."""
    import ast
    from pydoc_data.topics import topics

    documents = [topics[name] for name in sorted(topics)]
    for path in sorted(_stdlib().glob("*.py")):
        try:
            docstring = ast.get_docstring(ast.parse(path.read_bytes()))
        except (SyntaxError, ValueError, OSError):
            continue
        if docstring and len(docstring.split()) >= MIN_DOCSTRING_WORDS:
            documents.append(docstring)
    return documents

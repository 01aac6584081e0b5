"""The codebase a code retrieval case searches: where it is, which files, and its fingerprint.

A case names its corpus in one of three ways:

- `path: <folder or file>`: a directory, relative to the data file's folder (or absolute);
- `package: <name>`: an installed Python package, located at run time without importing it;
- `stdlib: <part>`: a package or module of the Python standard library (`json`, `textwrap`,
  `xml/etree`), or `.` for the whole library.

`include` and `exclude` are globs relative to the corpus root (`*` stays within a folder, `**/`
spans folders). Hidden folders and `__pycache__`, `node_modules`, `site-packages` and
`dist-packages` are never searched; binary files and files over 1 MB are skipped.

The fingerprint is the md5 of every chosen file's relative path and content. It goes into the
result key, so a changed corpus means new results. It is computed for every item at collection,
cached runs included, so it is remembered by the run (`ragmatrix.foundations.context`) while the files'
sizes and times stand.

Within a run a corpus is listed and read once (`session_corpus`), however many globs it has and
however many items search it; the next run lists it again, and sees what was edited. Expected files
may be named by a unique suffix of their path (`matcher/src/lib.rs`), as the Rust embedding
benchmark allows; `resolve` says which file a name means, or why none.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sysconfig
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from pydantic import ConfigDict, Field, model_validator

from ragmatrix.foundations.context import RunContext, current
from ragmatrix.foundations.data_model import DataModel, empty_list
from ragmatrix.foundations.keys import canonical_json
from ragmatrix.seam.case import CaseInputError

SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})
MAX_FILE_BYTES = 1_000_000


class CorpusSpec(DataModel):
    """Where a corpus is, and which of its files count."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    package: str | None = None
    stdlib: str | None = None
    include: list[str] = Field(default_factory=lambda: ["**/*"], min_length=1)
    exclude: list[str] = Field(default_factory=empty_list)

    @model_validator(mode="after")
    def one_location(self) -> CorpusSpec:
        given = [name for name in ("path", "package", "stdlib") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of path, package, stdlib")
        return self

    @property
    def label(self) -> str:
        for name in ("path", "package", "stdlib"):
            value = getattr(self, name)
            if value is not None:
                return f"{name} {value}"
        return "corpus"


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the corpus root, with forward slashes
    text: str


@dataclass(frozen=True)
class Corpus:
    label: str
    root: Path
    files: tuple[SourceFile, ...]  # sorted by path
    fingerprint: str

    @cached_property
    def paths(self) -> frozenset[str]:
        return frozenset(f.path for f in self.files)

    @cached_property
    def _by_name(self) -> dict[str, list[str]]:
        names: dict[str, list[str]] = {}
        for f in self.files:
            names.setdefault(f.path.rsplit("/", 1)[-1], []).append(f.path)
        return names

    def file(self, path: str) -> SourceFile | None:
        return next((f for f in self.files if f.path == path), None)

    def resolve(self, name: str) -> tuple[str | None, str | None]:
        """The corpus file an expected file names: the exact relative path, else the one file
        whose path ends with it at a folder boundary (`src/lib.rs` names `crates/x/src/lib.rs`).
        Returns (path, None), or (None, why not) when no file or several files match."""
        wanted = name.strip().replace("\\", "/").removeprefix("./")
        if wanted in self.paths:
            return wanted, None
        candidates = [p for p in self._by_name.get(wanted.rsplit("/", 1)[-1], []) if p.endswith("/" + wanted)]
        if len(candidates) == 1:
            return candidates[0], None
        if candidates:
            shown = ", ".join(candidates[:3]) + (", ..." if len(candidates) > 3 else "")
            return None, f"expected file {name} is ambiguous in the corpus ({self.label}): {shown}"
        return None, f"expected file {name} is not in the corpus ({self.label})"


@lru_cache(maxsize=1)
def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def locate(spec: CorpusSpec, directory: Path) -> tuple[Path, list[str] | None]:
    """The corpus root, and the one file when the corpus is a single file (None for a folder).
    Raises `CaseInputError` with one line when it cannot be found."""
    if spec.path is not None:
        path = Path(os.path.expandvars(spec.path)).expanduser()
        path = path if path.is_absolute() else directory / path
        if path.is_dir():
            return path, None
        if path.is_file():
            return path.parent, [path.name]
        raise CaseInputError(f"corpus path {spec.path} not found")
    if spec.package is not None:
        return _locate_package(spec.package)
    part = (spec.stdlib or ".").strip().strip("/") or "."
    root = stdlib_root()
    if part == ".":
        return root, None
    for candidate in (root / part, root / part.replace(".", "/")):
        if candidate.is_dir():
            return candidate, None
        module = candidate.with_name(candidate.name + ".py")
        if module.is_file():
            return module.parent, [module.name]
        if candidate.is_file():
            return candidate.parent, [candidate.name]
    raise CaseInputError(f"no part '{spec.stdlib}' in the Python standard library at {root.name}")


def _locate_package(name: str) -> tuple[Path, list[str] | None]:
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise CaseInputError(f"package {name} is not installed")
    locations = list(found.submodule_search_locations or [])
    if locations:
        return Path(locations[0]), None
    if found.origin and Path(found.origin).is_file():
        origin = Path(found.origin)
        return origin.parent, [origin.name]
    raise CaseInputError(f"package {name} has no source files")


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob relative to the corpus root as a regex over relative paths: `**/` is any number
    of folders, `*` and `?` stay within one name, `[...]` is a character class."""
    pattern = pattern.strip().removeprefix("./")
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def _matches(path: str, patterns: list[str]) -> bool:
    return any(glob_regex(p).fullmatch(path) for p in patterns)


def _literal_prefix(pattern: str) -> str:
    """The folders a glob starts in before its first wildcard: the only place to walk."""
    folders = pattern.strip().removeprefix("./").split("/")[:-1]
    prefix: list[str] = []
    for folder in folders:
        if any(c in folder for c in "*?["):
            break
        prefix.append(folder)
    return "/".join(prefix)


class Corpora:
    """The corpora a run has read: by spec and folder (`session_corpus`, listed once per run),
    and by spec, root and the files' sizes and times (`load_corpus`). `listings` counts the
    folders walked: the measure of `session_corpus`'s economy."""

    MEMO_SIZE = 16

    def __init__(self, run: RunContext) -> None:
        self.by_stamp: dict[tuple[str, str, tuple[tuple[str, int, int], ...]], Corpus] = {}
        self.by_spec: dict[tuple[str, str], Corpus] = {}
        self.listings = 0


def corpora() -> Corpora:
    """The current run's corpora."""
    return current().part(Corpora)


def list_files(root: Path, include: list[str], exclude: list[str]) -> list[str]:
    """Relative paths of the files under `root` chosen by the globs, sorted."""
    corpora().listings += 1
    base = str(root)
    chosen: set[str] = set()
    for pattern in include:
        if not any(c in pattern for c in "*?["):  # a plain file name
            relative = pattern.strip().removeprefix("./")
            if os.path.isfile(os.path.join(base, relative)):
                chosen.add(relative)
            continue
        start = _literal_prefix(pattern)
        regex = glob_regex(pattern)
        for folder, subfolders, names in os.walk(os.path.join(base, start) if start else base):
            subfolders[:] = [d for d in subfolders if d not in SKIPPED_FOLDERS and not d.startswith(".")]
            relative = os.path.relpath(folder, base).replace(os.sep, "/")
            for name in names:
                path = name if relative == "." else f"{relative}/{name}"
                # a regular file only: a dangling link or a socket is not code
                if regex.fullmatch(path) and os.path.isfile(os.path.join(folder, name)):
                    chosen.add(path)
    return sorted(p for p in chosen if not _matches(p, exclude))


def _stamp(root: Path, paths: list[str]) -> tuple[tuple[str, int, int], ...]:
    base = str(root)
    stats = []
    for path in paths:
        st = os.stat(os.path.join(base, path))
        stats.append((path, st.st_size, st.st_mtime_ns))
    return tuple(stats)


def load_corpus(spec: CorpusSpec, directory: Path) -> Corpus:
    """The corpus a case names, read once per run while its files are unchanged."""
    try:
        return _load_corpus(spec, directory)
    except OSError as error:  # unreadable, or gone since it was listed
        name = Path(error.filename).name if error.filename else spec.label
        raise CaseInputError(f"corpus {spec.label}: cannot read {name}: {error.strerror or error}") from None


def _load_corpus(spec: CorpusSpec, directory: Path) -> Corpus:
    root, single = locate(spec, directory)
    paths = single if single is not None else list_files(root, spec.include, spec.exclude)
    for path in paths:
        _refuse_undecodable_name(spec, path)
    stamp = _stamp(root, paths)
    key = (canonical_json(spec.model_dump()), str(root), stamp)
    read_before = corpora().by_stamp
    if key not in read_before:
        read = [_read(root, path) for path, size, _ in stamp if size <= MAX_FILE_BYTES]
        chosen = [(source, digest) for source, digest in read if source is not None]
        if not chosen:
            excluded = f", exclude {', '.join(spec.exclude)}" if spec.exclude else ""
            raise CaseInputError(f"corpus {spec.label} (include {', '.join(spec.include)}{excluded}) has no files")
        digest = hashlib.md5()
        for source, content in chosen:
            digest.update(source.path.encode("utf-8") + b"\0" + content + b"\0")
        if len(read_before) > Corpora.MEMO_SIZE:
            read_before.clear()
        read_before[key] = Corpus(spec.label, root, tuple(source for source, _ in chosen), digest.hexdigest())
    return read_before[key]


def _refuse_undecodable_name(spec: CorpusSpec, path: str) -> None:
    """A file name that is not UTF-8 (the file system hands it over with its bytes escaped) can
    be neither keyed nor stored in a row: one line naming it, instead of a crash."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise CaseInputError(
            f"corpus {spec.label}: the file name {shown} is not UTF-8; rename it, or leave it out with exclude"
        ) from None


def session_corpus(spec: CorpusSpec, directory: Path) -> Corpus:
    """The corpus, listed and read once per run: collection and every item of every model
    share it. A corpus that cannot be read is not remembered, so its error is raised each time."""
    key = (canonical_json(spec.model_dump()), str(directory))
    listed = corpora().by_spec
    corpus = listed.get(key)
    if corpus is None:
        corpus = listed[key] = load_corpus(spec, directory)
    return corpus


def _read(root: Path, path: str) -> tuple[SourceFile | None, bytes]:
    """The file as text, and the md5 of its bytes; no text for a binary file."""
    data = (root / path).read_bytes()
    if b"\0" in data[:8192]:
        return None, b""
    return SourceFile(path, data.decode("utf-8", "replace")), hashlib.md5(data).digest()

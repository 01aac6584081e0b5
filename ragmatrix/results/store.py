"""The result store: one JSONL file per family, append-only under a file lock.

Rows are JSON objects with sorted keys, one per line. Writers (xdist workers included)
append under a lock; a process killed mid-write leaves at worst a torn last line, which
loading ignores and reports. At session end the controller compacts each file: the newest
row per (test, model, item) wins, rows are sorted, and the file is replaced atomically.

What a row costs is kept small, since a large matrix writes tens of thousands of them:
- a store opens each family's lock file and data file once, and each append is one locked
  `write` of the whole line to the end of the file (the row survives a kill as soon as the
  call returns); a write that fails is cut back off, so the file stays as it was;
- loading streams the file line by line, and a store remembers what it read: loading again
  parses only the lines appended since, once it has checked that the file still begins with
  exactly the bytes it read (their digest, not only the inode number: a file system reuses the
  number of a replaced file, so a file another session compacted can carry it); any other file
  is read anew. Compaction therefore merges what is on disk under the lock, every other
  session's rows included, never a stale view of an older file;
- compaction rewrites a file only when it is not compact already (rows appended out of
  order, an item twice, a row to drop, a bad line), so an unchanged store is never written.

Reading takes no lock, so a fully cached run works on a read-only results folder; a write
that the file system refuses raises `StorageError`, one line naming the folder and the cause.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.foundations.file_lock import FileLock
from ragmatrix.foundations.regular_file import open_regular
from ragmatrix.foundations.shared_values import SharedValues
from ragmatrix.foundations.storage import writes_to
from ragmatrix.results.rows import Row


def sort_key(row: Row) -> tuple[str, str, str]:
    return (row.model, row.test, row.item)


@dataclass
class Loaded:
    rows: list[Row] = field(default_factory=list)
    # one line each: "x.jsonl: line 7 is torn or not JSON (ignored)", or not a valid row
    problems: list[str] = field(default_factory=list)
    unreadable: str | None = None  # why the file could not be read at all; then it is never rewritten


@dataclass
class _Read:
    """What a store has read of one file: its complete lines up to `offset`, and their digest.

    The (device, inode) pair alone cannot tell a file from its successor: once a compaction has
    replaced the file and the last handle on the old one is closed, the file system may give
    the next file the same inode number. The digest of the bytes read can: what is read again
    continues this view only if the file still begins with exactly those bytes."""

    identity: tuple[int, int]  # (device, inode): a different pair is surely another file
    offset: int = 0
    lines: int = 0
    digest: Any = field(default_factory=hashlib.blake2b)  # of the bytes up to `offset`
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def continued_by(self, handle: BinaryIO, identity: tuple[int, int], size: int) -> bool:
        """Does the open file begin with the bytes this view read? Reads them again to know."""
        if identity != self.identity or size < self.offset:
            return False
        handle.seek(0)
        digest, left = hashlib.blake2b(), self.offset
        while left:
            block = handle.read(min(left, _BLOCK))
            if not block:
                return False
            digest.update(block)
            left -= len(block)
        return bool(digest.digest() == self.digest.digest())


_BLOCK = 1 << 20


class ResultStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._read: dict[str, _Read] = {}
        self._locks: dict[str, FileLock] = {}
        self._files: dict[str, tuple[int, tuple[int, int]]] = {}  # family -> (fd, identity) for appends
        self._path_texts: dict[str, str] = {}
        self._ends: dict[str, int] = {}  # family -> where this store's last row ended its file
        self._shared = _Shared()  # what the rows it loads have in common, held as long as they are
        self._prepared: set[str] = set()

    def path(self, family: str) -> Path:
        return self.directory / f"{family}.jsonl"

    def _lock(self, family: str) -> FileLock:
        """The family's lock, shared with every process writing this store (its file is made on
        first use, so reading never needs it)."""
        lock = self._locks.get(family)
        if lock is None:
            lock = self._locks[family] = FileLock(self.directory / f".{family}.jsonl.lock")
        return lock

    def families(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(path.stem for path in self.directory.glob("*.jsonl"))

    def load(self, family: str) -> Loaded:
        """Every valid row, in append order. A line that is torn, not JSON or not a valid row
        is reported and skipped, never fatal. Only what was appended since this store last
        read the file is parsed again."""
        path = self.path(family)
        try:
            handle = open_regular(path)
        except FileNotFoundError:
            self._read.pop(family, None)
            return Loaded()
        except OSError as error:  # unreadable, or a folder or FIFO by that name: its rows stay unknown
            self._read.pop(family, None)
            why = str(error.strerror or error)
            return Loaded(problems=[f"{path.name}: cannot read it ({why}; ignored)"], unreadable=why)
        with handle:
            status = os.fstat(handle.fileno())
            identity = (status.st_dev, status.st_ino)
            read = self._read.get(family)
            if read is None or not read.continued_by(handle, identity, status.st_size):
                read = _Read(identity)
            handle.seek(read.offset)
            tail_rows: list[Row] = []
            tail_problems: list[str] = []
            for line in handle:
                if not line.endswith(b"\n"):  # a last line being written, or torn: not kept as read
                    _parse(path.name, read.lines + 1, line, tail_rows, tail_problems, self._shared)
                    break
                read.offset += len(line)
                read.lines += 1
                read.digest.update(line)
                _parse(path.name, read.lines, line, read.rows, read.problems, self._shared)
        self._read[family] = read
        return Loaded(rows=read.rows + tail_rows, problems=read.problems + tail_problems)

    def as_last_read(self, family: str) -> Loaded | None:
        """The family's rows and problems as this store last read or wrote its file, without
        reading it again (`load` reads it again to know that it is still the same file): for a
        caller that has just loaded or compacted it. None where it has read nothing of it."""
        read = self._read.get(family)
        return None if read is None else Loaded(rows=read.rows, problems=read.problems)

    def read_digest(self, family: str) -> str | None:
        """What this store last read of the family's file, as a digest of its bytes and the
        file's size (a torn last line counts), or None where it read nothing."""
        read = self._read.get(family)
        if read is None:
            return None
        try:
            size = os.stat(self.path(family)).st_size
        except OSError:
            return None
        return f"{read.digest.hexdigest()}:{read.offset}:{size}"

    def load_all(self) -> dict[str, Loaded]:
        return {family: self.load(family) for family in self.families()}

    def completed(self, family: str | None = None) -> set[tuple[str, str]]:
        """(model id, key) of every row that holds a result, of one family or of all. Error rows
        are not results, so they rerun. The model id is part of it because rows belong to a
        models.yaml id: a second id with the same settings computes its own rows."""
        done: set[tuple[str, str]] = set()
        for loaded in self.load_all().values() if family is None else [self.load(family)]:
            done.update((row.model, row.key) for row in loaded.rows if row.ok)
        return done

    def prepare(self, family: str) -> None:
        """Make sure rows of `family` can be written before work is spent on them: the folder
        and the lock file are made, an existing data file is opened for appending. Raises
        `StorageError` where the file system refuses; nothing to do after the first call."""
        if family in self._prepared:
            return
        with writes_to(self.directory), self._lock(family):
            if self.path(family).exists():
                self._appending(family)
        self._prepared.add(family)

    def append(self, family: str, row: Row) -> None:
        """Write one row at the end of the family's file, under the lock, in one write."""
        line = (json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
        with writes_to(self.directory), self._lock(family):
            descriptor, size = self._appending(family)
            # A writer killed mid-line leaves no newline at the end; start on a fresh line so
            # the torn fragment stays one bad line instead of corrupting this row too. (Where
            # the file ends where this store's last row ended, that row's newline ends it.)
            if size and size != self._ends.get(family) and _last_byte(descriptor, size) != b"\n":
                line = b"\n" + line
            try:
                _write_all(descriptor, line)
            except OSError:
                self._ends.pop(family, None)
                try:  # a full disk may have taken part of the line: leave the file as it was
                    os.ftruncate(descriptor, size)
                except OSError:
                    pass  # the part written is a torn line, which loading ignores
                raise
            self._ends[family] = size + len(line)

    def _appending(self, family: str) -> tuple[int, int]:
        """The family's file, open for appending, and its size; opened again when another
        process replaced it (a compaction, a merge) or removed it since. Called under the lock."""
        path = self._path_texts.get(family)
        if path is None:  # as text, worked out once: it is looked up for every row
            path = self._path_texts[family] = str(self.path(family))
        known = self._files.get(family)
        try:
            status = os.stat(path)
            if known is not None and known[1] == (status.st_dev, status.st_ino):
                return known[0], status.st_size  # the path is still the open file: its size too
        except FileNotFoundError:
            pass
        if known is not None:
            os.close(known[0])
            del self._files[family]
        self._ends.pop(family, None)
        self.directory.mkdir(parents=True, exist_ok=True)
        # Read and write: the last byte is read to find a torn line; O_APPEND puts every write
        # at the end, wherever another process left it.
        descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        status = os.fstat(descriptor)
        self._files[family] = (descriptor, (status.st_dev, status.st_ino))
        return descriptor, status.st_size

    def compact(self, family: str, keep: Callable[[Row], bool] | None = None) -> Loaded:
        """Rewrite a family's file: newest row per identity, sorted, atomically replaced.

        `keep` drops rows that no longer belong (a case deleted from the YAML). A file that is
        compact already is left as it is, without taking the lock. Returns what was loaded,
        with the problems found.
        """
        loaded = self.load(family)
        if loaded.unreadable or _compacted(loaded, keep) is None:
            return loaded
        path = self.path(family)
        with writes_to(self.directory), self._lock(family):
            loaded = self.load(family)  # again, under the lock: a worker may have appended since
            rows = _compacted(loaded, keep)
            if loaded.unreadable or rows is None or not path.exists():
                return loaded
            # What is written is what a load would read: remembered instead of read again. The
            # lines are made as they are written (a large file's text is never held whole).
            written = _Read((0, 0), rows=rows, lines=len(rows))

            def lines() -> Iterator[str]:
                for row in rows:
                    text = json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False) + "\n"
                    data = text.encode("utf-8")
                    written.offset += len(data)
                    written.digest.update(data)
                    yield text

            write_atomically(path, lines())
            status = os.stat(path)
            written.identity = (status.st_dev, status.st_ino)
            self._read[family] = written
        return loaded

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit the os module may be gone already
            pass

    def close(self) -> None:
        """Close the files kept open for appending and locking."""
        for descriptor, _ in self._files.values():
            os.close(descriptor)
        self._files.clear()
        for lock in self._locks.values():
            lock.close()
        self._locks.clear()
        self._prepared.clear()


def _compacted(loaded: Loaded, keep: Callable[[Row], bool] | None) -> list[Row] | None:
    """The rows a compacted file holds, or None when the file holds exactly these already."""
    if not loaded.problems and _in_order(loaded.rows) and (keep is None or all(map(keep, loaded.rows))):
        return None  # the common case at the end of a run that appended nothing: one pass, no sort
    newest: dict[tuple[str, str, str], Row] = {}
    for row in loaded.rows:
        newest[row.identity] = row
    rows = sorted((r for r in newest.values() if keep is None or keep(r)), key=sort_key)
    unchanged = not loaded.problems and len(rows) == len(loaded.rows)
    if unchanged and all(a is b for a, b in zip(rows, loaded.rows, strict=True)):
        return None
    return rows


def _in_order(rows: list[Row]) -> bool:
    """Are the rows sorted as compaction sorts them, each identity once? (Strictly increasing
    sort keys: a row's sort key holds its identity.)"""
    return all(a < b for a, b in pairwise(map(sort_key, rows)))


def _parse(name: str, number: int, line: bytes, rows: list[Row], problems: list[str], shared: _Shared) -> None:
    if not line.strip():
        return
    try:
        rows.append(shared.slimmed(Row.model_validate_json(line)))
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] in ("json_invalid", "model_type") and not first["loc"]:
            problems.append(f"{name}: line {number} is torn or not JSON (ignored)")
            return
        where = ".".join(str(part) for part in first["loc"]) or "row"
        problems.append(f"{name}: line {number} is not a valid result row ({where}: {first['msg']}; ignored)")


class _Shared(SharedValues):
    """What loaded rows have in common, held once (`ragmatrix.foundations.shared_values`): a
    large store holds every row in memory, and each parsed row had its own copy of the same
    provenance, usage counts, names and, largest of all, the set of its given fields (2 KB of
    a 3.8 KB row; 1.6 KB a row now). A loaded row is read, never changed."""

    NAMES = ("family", "test", "model", "status", "variant", "recorded_at")

    def slimmed(self, row: Row) -> Row:
        fields = row.__dict__
        for name in self.NAMES:
            value = fields.get(name)
            if isinstance(value, str):
                fields[name] = self.one("name", value, value)
        provenance = row.provenance
        if not provenance.__pydantic_extra__:
            key = (provenance.format, provenance.ragmatrix, provenance.commit, provenance.dirty)
            fields["provenance"] = self.one("provenance", key, provenance)
        try:
            fields["usage"] = self.one("usage", tuple(sorted(row.usage.items())), row.usage)
        except TypeError:  # a value that cannot be hashed: kept as it is
            pass
        for model in (row, *row.iterations):  # not deeper: a row's metrics hold no models
            self.fields_set_of(model)
        return row


def _last_byte(descriptor: int, size: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(descriptor, 1, size - 1)
    os.lseek(descriptor, size - 1, os.SEEK_SET)
    return os.read(descriptor, 1)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]

"""The result store: one JSONL file per family, append-only under a file lock.

Rows are JSON objects with sorted keys, one per line. Writers (xdist workers included)
append under a lock; a process killed mid-write leaves at worst a torn last line, which
loading ignores and reports. At session end the controller compacts each file: the newest
row per (test, model, item) wins, rows are sorted, and the file is replaced atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import ValidationError

from ragmatrix.rows import Row


def sort_key(row: Row) -> tuple[str, str, str]:
    return (row.model, row.test, row.item)


@dataclass
class Loaded:
    rows: list[Row] = field(default_factory=list)
    # one line each: "x.jsonl: line 7 is torn or not JSON (ignored)", or not a valid row
    problems: list[str] = field(default_factory=list)


class ResultStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path(self, family: str) -> Path:
        return self.directory / f"{family}.jsonl"

    def _lock(self, family: str) -> FileLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.directory / f".{family}.jsonl.lock"))

    def families(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(path.stem for path in self.directory.glob("*.jsonl"))

    def load(self, family: str) -> Loaded:
        """Every valid row, in append order. A line that is torn, not JSON or not a valid row
        is reported and skipped, never fatal."""
        path = self.path(family)
        records, problems = numbered_records(path)
        rows: list[Row] = []
        for number, record in records:
            try:
                rows.append(Row.model_validate(record))
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "row"
                problems.append(
                    f"{path.name}: line {number} is not a valid result row ({where}: {first['msg']}; ignored)"
                )
        return Loaded(rows=rows, problems=problems)

    def load_all(self) -> dict[str, Loaded]:
        return {family: self.load(family) for family in self.families()}

    def completed(self) -> set[tuple[str, str]]:
        """(model id, key) of every row that holds a result. Error rows are not results, so they
        rerun. The model id is part of it because rows belong to a models.yaml id: a second id
        with the same settings computes its own rows."""
        done: set[tuple[str, str]] = set()
        for loaded in self.load_all().values():
            done.update((row.model, row.key) for row in loaded.rows if row.ok)
        return done

    def append(self, family: str, row: Row) -> None:
        line = (json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
        path = self.path(family)
        with self._lock(family):
            with open(path, "ab") as handle:
                # A writer killed mid-line leaves no newline at the end; start on a fresh line so
                # the torn fragment stays one bad line instead of corrupting this row too.
                if ends_torn(path):
                    line = b"\n" + line
                handle.write(line)

    def compact(self, family: str, keep: Callable[[Row], bool] | None = None) -> Loaded:
        """Rewrite a family's file: newest row per identity, sorted, atomically replaced.

        `keep` drops rows that no longer belong (a case deleted from the YAML). Returns what
        was loaded, with the problems found.
        """
        path = self.path(family)
        with self._lock(family):
            loaded = self.load(family)
            if not path.exists():
                return loaded
            newest: dict[tuple[str, str, str], Row] = {}
            for row in loaded.rows:
                newest[row.identity] = row
            rows = sorted((r for r in newest.values() if keep is None or keep(r)), key=sort_key)
            _atomic_write(path, (json.dumps(r.to_json(), sort_keys=True, ensure_ascii=False) + "\n" for r in rows))
        return loaded


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The JSON objects of a JSONL file that writers append to, in order, and one problem
    line per line that is torn or not an object: a killed writer must not make it unreadable."""
    records, problems = numbered_records(path)
    return [record for _, record in records], problems


def numbered_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """`read_jsonl`, with each object's line number."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[str] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            records.append((number, record))
        else:
            problems.append(f"{path.name}: line {number} is torn or not JSON (ignored)")
    return records, problems


def ends_torn(path: Path) -> bool:
    """Does a non-empty file end without a newline (a writer killed mid-line)?"""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return False
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except FileNotFoundError:
        return False


def _atomic_write(path: Path, lines: Iterable[str]) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`: readers see the
    old file or the new one, never half of either."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates the file 0600; the store is a shared, committed file like any other
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

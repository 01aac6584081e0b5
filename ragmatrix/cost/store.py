"""Cost records on disk: `<results>/costs/<family>.jsonl`, beside the result rows.

They live in a folder of their own because the result store reads every top-level `*.jsonl`
of the results folder as a family's rows. Like the rows, records are appended under a file
lock (each xdist worker appends its own deltas), a torn last line is ignored and reported, and
at session end the controller compacts each file: one line per (model, device), combined by
counts (`ragmatrix.cost.record.combine`), sorted, replaced atomically. Nothing is ever dropped.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ragmatrix.cost.record import CostRecord, combine_all
from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.foundations.file_lock import FileLock
from ragmatrix.foundations.jsonl import ends_torn, numbered_records
from ragmatrix.foundations.storage import writes_to

FOLDER = "costs"


@dataclass
class LoadedCosts:
    records: list[CostRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unreadable: str | None = None  # why a file could not be read at all; then it is never rewritten


def line_of(record: CostRecord) -> str:
    return json.dumps(record.to_json(), sort_keys=True, ensure_ascii=False) + "\n"


class CostStore:
    def __init__(self, results_dir: Path) -> None:
        self.directory = Path(results_dir) / FOLDER

    def path(self, family: str) -> Path:
        return self.directory / f"{family}.jsonl"

    def _lock(self, family: str) -> FileLock:
        return FileLock(self.directory / f".{family}.jsonl.lock")

    def families(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(path.stem for path in self.directory.glob("*.jsonl"))

    def append(self, records: Iterable[CostRecord]) -> None:
        by_family: dict[str, list[CostRecord]] = defaultdict(list)
        for record in records:
            by_family[record.family].append(record)
        for family, mine in sorted(by_family.items()):
            data = "".join(line_of(record) for record in mine).encode("utf-8")
            path = self.path(family)
            with writes_to(self.directory.parent), self._lock(family):
                with open(path, "ab") as handle:
                    if ends_torn(path):  # a writer killed mid-line: keep its fragment one bad line
                        data = b"\n" + data
                    handle.write(data)

    def load(self, family: str) -> LoadedCosts:
        """Every valid record of a family's file, as stored (deltas not yet combined)."""
        path = self.path(family)
        try:
            records, problems = numbered_records(path)
        except OSError as error:  # unreadable, or a folder or FIFO by that name: its records stay unknown
            why = str(error.strerror or error)
            return LoadedCosts(problems=[f"{FOLDER}/{path.name}: cannot read it ({why}; ignored)"], unreadable=why)
        loaded = LoadedCosts(problems=[f"{FOLDER}/{problem}" for problem in problems])
        for number, data in records:
            try:
                loaded.records.append(CostRecord.model_validate(data))
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "record"
                loaded.problems.append(
                    f"{FOLDER}/{path.name}: line {number} is not a valid cost record ({where}: {first['msg']}; ignored)"
                )
        return loaded

    def load_all(self) -> LoadedCosts:
        """Every family's records, one per (family, model, device)."""
        everything = LoadedCosts()
        for family in self.families():
            loaded = self.load(family)
            everything.records += loaded.records
            everything.problems += loaded.problems
            everything.unreadable = everything.unreadable or loaded.unreadable
        everything.records = combine_all(everything.records)
        return everything

    def compact(self, family: str) -> list[str]:
        """One line per (model, device), combined by counts; returns the problems found. A file
        that is compact already is left as it is, without taking the lock: a fully cached run
        writes nothing, so it runs on a folder it cannot write."""
        path = self.path(family)
        loaded = self.load(family)
        if loaded.unreadable or _is_compact(loaded):
            return loaded.problems
        with writes_to(self.directory.parent), self._lock(family):
            loaded = self.load(family)
            if not loaded.unreadable and path.exists() and not _is_compact(loaded):
                write_atomically(path, (line_of(record) for record in combine_all(loaded.records)))
        return loaded.problems

    def compact_all(self) -> list[str]:
        return [problem for family in self.families() for problem in self.compact(family)]

    def write(self, family: str, records: list[CostRecord]) -> None:
        """Replace a family's file with these records (combined)."""
        with writes_to(self.directory.parent), self._lock(family):
            write_atomically(self.path(family), (line_of(record) for record in combine_all(records)))


def _is_compact(loaded: LoadedCosts) -> bool:
    """Does the file hold exactly what compaction would write?"""
    combined = combine_all(loaded.records)
    return not loaded.problems and [line_of(r) for r in combined] == [line_of(r) for r in loaded.records]


@dataclass
class MergedCosts:
    records: dict[str, int] = field(default_factory=dict)  # family -> records written
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def merge_costs(sources: Iterable[Path], into: Path) -> MergedCosts:
    """The cost records of several results folders in one, never dropping a measurement.

    Each record names the sessions that measured it. A record whose sessions another source's
    record already holds (the same results, or an older copy of them) is that record's part and
    is not counted twice; records of other sessions are combined by counts. Two records that
    share only some sessions (two copies that each went on measuring) are combined all the same,
    and a note says that the shared part is counted twice: its rates stay true, its counts do not.
    """
    merged = MergedCosts()
    by_key: dict[tuple[str, str, str], list[tuple[str, CostRecord]]] = defaultdict(list)
    for source in sources:
        store = CostStore(source)
        for family in store.families():
            loaded = store.load(family)
            merged.problems += [f"{source}/{problem}" for problem in loaded.problems]
            for record in combine_all(loaded.records):
                by_key[record.key].append((str(source), record))
    by_family: dict[str, list[CostRecord]] = defaultdict(list)
    for key, found in sorted(by_key.items()):
        origin, kept = found[0]
        for other_origin, record in found[1:]:
            mine, theirs = set(kept.sessions), set(record.sessions)
            if theirs and theirs <= mine:
                continue
            if mine and mine <= theirs:
                origin, kept = other_origin, record
                continue
            if mine & theirs:
                merged.notes.append(
                    f"{key[0]}: {key[1]} on {key[2]}: {origin} and {other_origin} share {len(mine & theirs)} "
                    "measuring session(s); combined, so their counts are doubled (rates stay true)"
                )
            kept = combine_all([kept, record])[0]
        by_family[key[0]].append(kept)
    target = CostStore(into)
    for family, records in sorted(by_family.items()):
        target.write(family, records)
        merged.records[family] = len(records)
    return merged

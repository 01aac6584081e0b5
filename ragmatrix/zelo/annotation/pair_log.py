"""The pairs file: every judgement of an annotation run, appended as it is made, with the
judge's reasoning."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from ragmatrix.foundations.jsonl import ends_torn, read_jsonl


def pairs_path(output: Path) -> Path:
    """`out.jsonl` -> `out.pairs.jsonl`, beside the output."""
    output = Path(output)
    stem = output.name[: -len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.pairs.jsonl")


class PairLog:
    """The scored pairs: one JSON object per judgement, appended and flushed as each is made.

    A run killed mid-write leaves at worst a torn last line, which loading skips and reports.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._torn: bool | None = None  # does the file end in a torn line? (checked once)

    def load(self) -> tuple[dict[str, dict[str, Any]], list[str]]:
        rows, problems = read_jsonl(self.path)
        records: dict[str, dict[str, Any]] = {}
        for record in rows:
            if "key" in record:
                records[str(record["key"])] = record
            else:
                problems.append(f"{self.path.name}: a record without a key (ignored)")
        return records, problems

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            if self._torn is None:
                self._torn = ends_torn(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                # after a torn line, start a fresh one so that this record stays readable
                handle.write(("\n" if self._torn else "") + line)
                handle.flush()  # in the file the moment it is made: a kill loses nothing recorded
            self._torn = False


def battles_of(pairs: Path, query_id: str) -> list[tuple[str, str, float]]:
    """Every valid judgement recorded for a query, as (a, b, score) with a and b as shown
    (score > 0: b is more relevant), for every judge."""
    records, _ = PairLog(pairs).load()
    return [
        (str(r["a"]), str(r["b"]), float(r["score"]))
        for r in records.values()
        if str(r.get("query_id")) == query_id and r.get("valid") and r.get("score") is not None
    ]

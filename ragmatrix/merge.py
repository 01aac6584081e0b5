"""Merging result stores from several machines into one.

A store is a folder of `<family>.jsonl` files. One machine runs `--models X`, another
`--models Y`; each commits its own store (or the same store on two branches). Merging unions
the rows, keeps one row per item (test, model, item), and writes each family's file compacted
and sorted, as the plugin's own compaction would.

Which row of an item wins: a result (status ok) over an error row, then the newest
(`recorded_at`). Two results for one item that disagree (another result key: other settings,
another case version; or the same key with another score) are a conflict: the newest still
wins, and the conflict is reported so that nobody mistakes it for a clean union.

The cost records in each store's `costs/` folder are merged too, never dropped: records of the
same (family, model, device) are combined by counts, and a record already contained in another
(the same results, or an older copy of them) is not counted twice (`ragmatrix.cost.store`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragmatrix.cost.store import merge_costs
from ragmatrix.rows import Row
from ragmatrix.store import ResultStore, _atomic_write, sort_key


@dataclass
class MergeReport:
    rows: dict[str, int] = field(default_factory=dict)  # family -> rows written
    conflicts: list[str] = field(default_factory=list)  # one line each
    problems: list[str] = field(default_factory=list)  # torn or unreadable lines, ignored
    costs: dict[str, int] = field(default_factory=dict)  # family -> cost records written
    cost_notes: list[str] = field(default_factory=list)  # cost records that share measurements


def merge_stores(sources: Sequence[Path], into: Path) -> MergeReport:
    """Merge the stores `sources` into the folder `into` (which may be one of them)."""
    report = MergeReport()
    by_family: dict[str, list[tuple[str, Row]]] = {}
    for source in sources:
        source = Path(source)
        if not source.is_dir():
            raise FileNotFoundError(f"{source}: no such results folder")
        for path in sorted(source.glob("*.jsonl")):
            loaded = ResultStore(source).load(path.stem)  # rows validated; bad lines reported
            report.problems += [f"{source}/{p}" for p in loaded.problems]
            by_family.setdefault(path.stem, []).extend((str(source), row) for row in loaded.rows)
    store = ResultStore(into)
    for family, rows in sorted(by_family.items()):
        chosen: dict[tuple[str, str, str], tuple[str, Row]] = {}
        for origin, row in rows:
            key = row.identity
            if key not in chosen:
                chosen[key] = (origin, row)
                continue
            kept_origin, kept = chosen[key]
            winner = _better(kept, row)
            if _disagree(kept, row):
                loser_origin, loser = (origin, row) if winner is kept else (kept_origin, kept)
                winner_origin = kept_origin if winner is kept else origin
                report.conflicts.append(
                    f"{family}: {'/'.join(key)}: kept {winner_origin} (recorded {winner.recorded_at or '?'}), "
                    f"dropped {loser_origin} (recorded {loser.recorded_at or '?'}): "
                    + ("another result key" if loser.key != winner.key else "another score")
                )
            if winner is row:
                chosen[key] = (origin, row)
        merged = sorted((row for _, row in chosen.values()), key=sort_key)
        path = store.path(family)
        path.parent.mkdir(parents=True, exist_ok=True)
        with store._lock(family):
            _atomic_write(path, (_line(row) for row in merged))
        report.rows[family] = len(merged)
    costs = merge_costs([Path(source) for source in sources], into)
    report.costs, report.cost_notes = costs.records, costs.notes
    report.problems += costs.problems
    return report


def _better(kept: Row, new: Row) -> Row:
    """A result beats an error row; otherwise the newer row wins (the later one on a tie)."""
    if kept.ok != new.ok:
        return kept if kept.ok else new
    return new if (new.recorded_at or "") >= (kept.recorded_at or "") else kept


def _disagree(a: Row, b: Row) -> bool:
    if not (a.ok and b.ok):
        return False  # an error row is no result to disagree with
    return a.key != b.key or a.score != b.score


def _line(row: Row) -> str:
    return json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False) + "\n"

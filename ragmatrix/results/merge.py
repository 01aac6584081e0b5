"""Merging result stores from several machines into one.

A store is a folder of `<family>.jsonl` files. One machine runs `--models X`, another
`--models Y`; each commits its own store (or the same store on two branches). Merging unions
the rows, keeps one row per item (test, model, item), and writes each family's file compacted
and sorted, as the plugin's own compaction would.

The folder merged into takes part as if it were named as a source: its rows are merged with,
never replaced wholesale, so `merge A B --into benchmark/results` adds A's and B's rows to the
committed ones. A row is only ever replaced by a better row of the same item. Files the merge
does not write (a family no source holds, anything that is not `<family>.jsonl`) stay as they
were.

Which row of an item wins: a result (status ok) over an error row, then the newest
(`recorded_at`). Two results for one item that disagree (another result key: other settings,
another case version; or the same key with another score) are a conflict: the newest still
wins, and the conflict is reported so that nobody mistakes it for a clean union. Lines that
cannot be read (torn, not JSON, not a valid row) are not copied; each is reported.

The cost records in each store's `costs/` folder are merged too, never dropped (the target's
own take part as well): records of the same (family, model, device) are combined by counts,
and a record already contained in another (the same results, or an older copy of them) is not
counted twice (`ragmatrix.cost.store`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragmatrix.cost.store import CostStore, merge_costs
from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.results.rows import Row
from ragmatrix.results.store import ResultStore, sort_key


@dataclass
class MergeReport:
    rows: dict[str, int] = field(default_factory=dict)  # family -> rows written
    conflicts: list[str] = field(default_factory=list)  # one line each
    problems: list[str] = field(default_factory=list)  # torn or unreadable lines, ignored
    costs: dict[str, int] = field(default_factory=dict)  # family -> cost records written
    cost_notes: list[str] = field(default_factory=list)  # cost records that share measurements
    # family -> rows the folder merged into held before, for the families written
    kept_from_target: dict[str, int] = field(default_factory=dict)
    untouched: list[str] = field(default_factory=list)  # the target's families no source holds


def merge_stores(sources: Sequence[Path], into: Path) -> MergeReport:
    """Merge the stores `sources` into the folder `into`, whose own rows take part too."""
    report = MergeReport()
    into = Path(into)
    for source in sources:
        if not Path(source).is_dir():
            raise FileNotFoundError(f"{source}: no such results folder")
    if into.exists() and not into.is_dir():
        raise FileNotFoundError(f"{into}: not a folder")
    target = _same_folder(into)
    named = [Path(s) for s in sources if _same_folder(Path(s)) != target]
    source_families = sorted({p.stem for s in named for p in s.glob("*.jsonl")})
    if any(_same_folder(Path(s)) == target for s in sources):
        source_families = sorted({*source_families, *ResultStore(into).families()})
    report.untouched = [f for f in ResultStore(into).families() if f not in source_families]
    _refuse_unreadable_target(into, source_families)
    store = ResultStore(into)
    for family in source_families:
        with store._lock(family):
            # The target first: on a tie a named source's row wins, as a later source's does.
            rows: list[tuple[str, Row]] = []
            for origin, folder in [(str(into), into), *((str(s), s) for s in named)]:
                loaded = ResultStore(folder).load(family)
                report.problems += [f"{origin}/{p}" for p in loaded.problems]
                rows += [(origin, row) for row in loaded.rows]
                if folder is into and loaded.rows:
                    report.kept_from_target[family] = len({row.identity for row in loaded.rows})
            merged = _one_row_per_item(family, rows, report)
            path = store.path(family)
            write_atomically(path, (_line(row) for row in merged))
        report.rows[family] = len(merged)
    # The target's own cost records take part too; one contained in a source's is not counted twice.
    costs = merge_costs([into, *(Path(source) for source in sources)] if into.is_dir() else sources, into)
    report.costs, report.cost_notes = costs.records, costs.notes
    report.problems += costs.problems
    return report


class UnreadableTarget(OSError):
    """A file of the folder merged into cannot be read: writing over it would lose its rows."""


def _refuse_unreadable_target(into: Path, families: list[str]) -> None:
    """Stop before anything is written when a file the merge would replace cannot be read."""
    store, costs = ResultStore(into), CostStore(into)
    files = [(store.path(family), store.load(family).unreadable) for family in families]
    files += [(costs.path(family), costs.load(family).unreadable) for family in costs.families()]
    for path, why in files:
        if why:
            raise UnreadableTarget(f"cannot read {path} ({why}), so nothing was merged into it")


def _one_row_per_item(family: str, rows: list[tuple[str, Row]], report: MergeReport) -> list[Row]:
    chosen: dict[tuple[str, str, str], tuple[str, Row]] = {}
    for origin, row in rows:
        key = row.identity
        if key not in chosen:
            chosen[key] = (origin, row)
            continue
        kept_origin, kept = chosen[key]
        winner = _better(kept, row)
        if _disagree(kept, row) and kept_origin != origin:
            loser_origin, loser = (origin, row) if winner is kept else (kept_origin, kept)
            winner_origin = kept_origin if winner is kept else origin
            report.conflicts.append(
                f"{family}: {'/'.join(key)}: kept {winner_origin} (recorded {winner.recorded_at or '?'}), "
                f"dropped {loser_origin} (recorded {loser.recorded_at or '?'}): "
                + ("another result key" if loser.key != winner.key else "another score")
            )
        if winner is row:
            chosen[key] = (origin, row)
    return sorted((row for _, row in chosen.values()), key=sort_key)


def _same_folder(path: Path) -> Path:
    return path.resolve()


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

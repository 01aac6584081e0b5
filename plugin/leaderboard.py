"""The terminal leaderboard: model x family, mean score, 95% CI, n, errors, invalid answers.

Only rows of a family's newest scoring version count, so scores from different scoring
rules are never averaged together; what is left out is said.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from plugin.cache import cache_dir
from plugin.keys import md5_of
from plugin.metrics import mean_interval

Row = dict[str, Any]


@dataclass
class Line:
    model: str
    family: str
    mean: float | None
    low: float | None
    high: float | None
    n: int  # scored iterations
    items: int
    errors: int  # items that ended in an error
    invalid: int  # invalid answers among the scored iterations


def _version_order(version: Any) -> tuple[int, Any]:
    return (0, version) if isinstance(version, int | float) else (1, str(version))


def summarise(
    rows_by_family: dict[str, list[Row]], keep: Callable[[Row], bool] | None = None
) -> tuple[list[Line], list[str]]:
    """Leaderboard lines, and one note per family for rows left out."""
    lines: list[Line] = []
    notes: list[str] = []
    for family, rows in sorted(rows_by_family.items()):
        rows = [r for r in rows if keep is None or keep(r)]
        if not rows:
            continue
        newest = max((r.get("scoring_version") for r in rows), key=_version_order)
        old = [r for r in rows if r.get("scoring_version") != newest]
        if old:
            notes.append(f"{family}: {len(old)} row(s) of an older scoring version left out (rerun them)")
        current = [r for r in rows if r.get("scoring_version") == newest]
        by_model: dict[str, list[Row]] = defaultdict(list)
        for row in current:
            by_model[row["model"]].append(row)
        for model, model_rows in by_model.items():
            lines.append(_line(model, family, model_rows))
    lines.sort(key=lambda line: (line.family, -(line.mean if line.mean is not None else -1.0), line.model))
    return lines, notes


def _line(model: str, family: str, rows: Iterable[Row]) -> Line:
    rows = list(rows)
    values: list[float] = []
    invalid = 0
    errors = 0
    for row in rows:
        if row.get("status") != "ok":
            errors += 1
            continue
        for entry in row.get("iterations", []):
            if entry.get("score") is not None:
                values.append(float(entry["score"]))
                invalid += entry.get("valid") is False
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    if values:
        mean, low, high = _remembered_interval(values)
    return Line(model, family, mean, low, high, len(values), len(rows), errors, invalid)


_INTERVALS = "intervals.json"


def _remembered_interval(values: list[float]) -> tuple[float, float, float]:
    """Intervals are remembered by the sorted values they came from: a fully cached run then
    prints the same leaderboard without importing scipy (over a second on its own)."""
    path = cache_dir() / _INTERVALS
    key = md5_of(sorted(values))
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        mean, low, high = known[key]
        return float(mean), float(low), float(high)
    mean, low, high = mean_interval(values)
    known[key] = [mean, low, high]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(known))
        os.replace(temporary, path)
    except OSError:
        pass  # a cache that cannot be written is only slower
    return mean, low, high


def render(lines: list[Line]) -> str:
    header = ("model", "family", "mean", "95% CI", "n", "items", "errors", "invalid")
    table = [header]
    for line in lines:
        if line.mean is None:
            mean, ci = "-", "-"
        else:
            mean, ci = f"{line.mean:.3f}", f"[{line.low:.3f}, {line.high:.3f}]"
        table.append(
            (line.model, line.family, mean, ci, str(line.n), str(line.items), str(line.errors), str(line.invalid))
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    numeric = {2, 4, 5, 6, 7}
    out = []
    for index, row in enumerate(table):
        cells = [
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)

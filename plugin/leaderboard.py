"""The terminal leaderboard: model x family, mean score, 95% CI, n, errors, invalid answers.

Only rows of a family's newest scoring version count, so scores from different scoring
rules are never averaged together; what is left out is said.

A family whose outcomes carry a `metrics` mapping (name -> value) also gets a table per
family of every metric, per model and variant, with 95% bootstrap intervals over its items.
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
from plugin.metrics import bootstrap_interval, mean_interval

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


def _remembered_interval(values: list[float], bootstrap: bool = False) -> tuple[float, float, float]:
    """Intervals are remembered by the sorted values they came from: a fully cached run then
    prints the same leaderboard without importing scipy (over a second on its own).
    `bootstrap` asks for a bootstrap interval even for values that are all 0 or 1."""
    path = cache_dir() / _INTERVALS
    key = md5_of({"bootstrap": sorted(values)}) if bootstrap else md5_of(sorted(values))
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        mean, low, high = known[key]
        return float(mean), float(low), float(high)
    if bootstrap:
        mean, (low, high) = sum(values) / len(values), bootstrap_interval(values)
    else:
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


# --- every metric, per model and variant -------------------------------------------------------


@dataclass
class MetricLine:
    model: str
    family: str
    variant: str
    n: int  # items with metrics
    values: dict[str, tuple[float, float, float]]  # metric -> mean, low, high


def summarise_metrics(
    rows_by_family: dict[str, list[Row]], keep: Callable[[Row], bool] | None = None
) -> list[MetricLine]:
    """Mean and bootstrap interval of every metric the outcomes carry, per (family, model,
    variant), over the items of the family's newest scoring version that ended without error."""
    lines: list[MetricLine] = []
    for family, rows in sorted(rows_by_family.items()):
        rows = [r for r in rows if keep is None or keep(r)]
        if not rows:
            continue
        newest = max((r.get("scoring_version") for r in rows), key=_version_order)
        groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for row in rows:
            if row.get("scoring_version") != newest or row.get("status") != "ok":
                continue
            per_item = _item_metrics(row)
            if not per_item:
                continue
            group = (str(row.get("model")), str(row.get("variant") or "-"))
            counts[group] += 1
            for name, value in per_item.items():
                groups[group][name].append(value)
        for (model, variant), metrics in sorted(groups.items()):
            values = {name: _remembered_interval(v, bootstrap=True) for name, v in sorted(metrics.items())}
            lines.append(MetricLine(model, family, variant, counts[(model, variant)], values))
    return lines


def _item_metrics(row: Row) -> dict[str, float]:
    """An item's metrics: each one's mean over the iterations that report it."""
    sums: dict[str, list[float]] = defaultdict(list)
    for entry in row.get("iterations", []):
        metrics = entry.get("metrics")
        if isinstance(metrics, dict):
            for name, value in metrics.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    sums[name].append(float(value))
    return {name: sum(v) / len(v) for name, v in sums.items()}


def render_metrics(lines: list[MetricLine], per_table: int = 4) -> str:
    """One block per family, its metrics in tables of `per_table` columns, each cell the mean
    and its 95% bootstrap interval."""
    out: list[str] = []
    for family in sorted({line.family for line in lines}):
        family_lines = [line for line in lines if line.family == family]
        names = sorted({name for line in family_lines for name in line.values})
        for start in range(0, len(names), per_table):
            columns = names[start : start + per_table]
            table = [("model", "variant", "n", *columns)]
            for line in family_lines:
                cells = []
                for name in columns:
                    mean, low, high = line.values.get(name, (None, None, None))
                    cells.append("-" if mean is None else f"{mean:.3f} [{low:.3f}, {high:.3f}]")
                table.append((line.model, line.variant, str(line.n), *cells))
            if out:
                out.append("")
            out.append(f"{family}: mean [95% bootstrap CI] over items")
            out.extend(_aligned(table, numeric_from=2))
    return "\n".join(out)


def _aligned(table: list[tuple[str, ...]], numeric_from: int) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    out = []
    for index, row in enumerate(table):
        cells = [
            cell.rjust(w) if i >= numeric_from else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return out

"""The leaderboard's numbers: model x family, mean score, 95% CI, n, errors, invalid answers.

The terminal summary and `python -m plugin report` both compute their numbers here, so they
agree; only their formats differ.

Stale or mixed rows never enter a mean (`select`): only rows of a family's newest scoring
version count, and of a model's rows in a family only those with its most common number of
iterations per item. What is left out is said, with the reason.

A family whose outcomes carry a `metrics` mapping (name -> value) also gets a table per
family of every metric, per model and variant, with 95% bootstrap intervals over its items.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from plugin.cache import cache_dir
from plugin.keys import md5_of
from plugin.stats.metrics import bootstrap_interval, cluster_bootstrap_interval, mean_interval

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


def iterations_of(row: Row) -> int:
    """The number of iterations a row was run with."""
    count = row.get("n_iterations")
    return int(count) if isinstance(count, int) else len(row.get("iterations", []))


@dataclass(frozen=True)
class LeftOut:
    """Rows of one model in one family that no mean includes, and why."""

    family: str
    model: str
    rows: int
    reason: str

    def note(self) -> str:
        return f"{self.family}: {self.rows} row(s) of {self.model} left out: {self.reason}"


@dataclass
class Selection:
    rows: dict[str, list[Row]] = field(default_factory=dict)  # family -> the rows that count
    left_out: list[LeftOut] = field(default_factory=list)


def select(rows_by_family: dict[str, list[Row]], keep: Callable[[Row], bool] | None = None) -> Selection:
    """The rows that may share a mean, and what was left out.

    - Scoring version: only rows of the family's newest version count, since older rows were
      scored by other rules (they rerun on the next `pytest benchmark`).
    - Iterations: of a model's finished rows in a family, only those run with its most common
      number of iterations per item count (on a tie, the larger number), since a mean over
      items of 1 and of 3 iterations would weigh them unequally. Error rows hold no score and
      are kept, so that errors are always counted.
    """
    selection = Selection()
    for family, rows in sorted(rows_by_family.items()):
        rows = [r for r in rows if keep is None or keep(r)]
        if not rows:
            continue
        newest = max((r.get("scoring_version") for r in rows), key=_version_order)
        by_model: dict[str, list[Row]] = defaultdict(list)
        for row in rows:
            by_model[str(row.get("model"))].append(row)
        kept: list[Row] = []
        for model, model_rows in sorted(by_model.items()):
            old = [r for r in model_rows if r.get("scoring_version") != newest]
            if old:
                versions = ", ".join(sorted({str(r.get("scoring_version")) for r in old}))
                reason = f"scoring version {versions} is older than {newest} (rerun them)"
                selection.left_out.append(LeftOut(family, model, len(old), reason))
            current = [r for r in model_rows if r.get("scoring_version") == newest]
            counts = Counter(iterations_of(r) for r in current if r.get("status") == "ok")
            if counts:
                chosen = max(counts, key=lambda n: (counts[n], n))
                mixed = [r for r in current if r.get("status") == "ok" and iterations_of(r) != chosen]
                if mixed:
                    others = ", ".join(str(n) for n in sorted({iterations_of(r) for r in mixed}))
                    reason = f"run with {others} iteration(s) per item, not {chosen} like the rest"
                    selection.left_out.append(LeftOut(family, model, len(mixed), reason))
                    left = {id(r) for r in mixed}
                    current = [r for r in current if id(r) not in left]
            kept.extend(current)
        if kept:
            selection.rows[family] = kept
    return selection


def summarise(
    rows_by_family: dict[str, list[Row]], keep: Callable[[Row], bool] | None = None
) -> tuple[list[Line], list[str]]:
    """Leaderboard lines, and one note per (family, model, reason) for rows left out."""
    selection = select(rows_by_family, keep)
    lines: list[Line] = []
    for family, rows in selection.rows.items():
        by_model: dict[str, list[Row]] = defaultdict(list)
        for row in rows:
            by_model[str(row.get("model"))].append(row)
        for model, model_rows in by_model.items():
            lines.append(_line(model, family, model_rows))
    # best first; a model with no score at all (every item an error) last
    lines.sort(key=lambda line: (line.family, line.mean is None, -(line.mean or 0.0), line.model))
    return lines, [left.note() for left in selection.left_out]


def scored_iterations(row: Row) -> list[dict[str, Any]]:
    """The iterations of a finished row that carry a score (invalid answers included: they
    score 0); none for an error row, which has no score."""
    if row.get("status") != "ok":
        return []
    return [entry for entry in row.get("iterations", []) if entry.get("score") is not None]


def item_score(row: Row) -> float | None:
    """An item's score: the mean over its scored iterations, None for an error row."""
    scores = [float(entry["score"]) for entry in scored_iterations(row)]
    return sum(scores) / len(scores) if scores else None


def _line(model: str, family: str, rows: Iterable[Row]) -> Line:
    rows = list(rows)
    by_case: dict[str, list[float]] = defaultdict(list)
    invalid = 0
    errors = 0
    for row in rows:
        if row.get("status") != "ok":
            errors += 1
            continue
        for entry in scored_iterations(row):
            by_case[str(row.get("case"))].append(float(entry["score"]))
            invalid += entry.get("valid") is False
    values = [v for scores in by_case.values() for v in scores]
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    if values:
        # One value per case: Wilson or a bootstrap. Several (prompt variants, chunkings,
        # iterations of one case): a bootstrap over cases, since they are not independent;
        # with only a few cases that would say nothing, and the items are resampled instead.
        clustered = any(len(g) > 1 for g in by_case.values()) and len(by_case) >= MIN_CASES_TO_CLUSTER
        groups = list(by_case.values()) if clustered else None
        mean, low, high = _remembered_interval(values, groups=groups)
    return Line(model, family, mean, low, high, len(values), len(rows), errors, invalid)


_INTERVALS = "intervals.json"
# Fewer cases than this and the interval resamples items, not cases.
MIN_CASES_TO_CLUSTER = 5


def _remembered_interval(
    values: list[float], bootstrap: bool = False, groups: list[list[float]] | None = None
) -> tuple[float, float, float]:
    """Intervals are remembered by the sorted values they came from: a fully cached run then
    prints the same leaderboard without importing scipy (over a second on its own).
    `bootstrap` asks for a bootstrap interval even for values that are all 0 or 1; `groups`
    for one that resamples whole groups of values (see `cluster_bootstrap_interval`)."""
    path = cache_dir() / _INTERVALS
    if groups is not None:
        key = md5_of({"groups": sorted(sorted(g) for g in groups)})
    else:
        key = md5_of({"bootstrap": sorted(values)}) if bootstrap else md5_of(sorted(values))
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        mean, low, high = known[key]
        return float(mean), float(low), float(high)
    if groups is not None:
        mean, low, high = cluster_bootstrap_interval(groups)
    elif bootstrap:
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
    rows_by_family: dict[str, list[Row]],
    keep: Callable[[Row], bool] | None = None,
    by_variant: bool = True,
) -> list[MetricLine]:
    """Mean and bootstrap interval of every metric the outcomes carry, per (family, model,
    variant), over the selected items (see `select`) that ended without error. With
    `by_variant=False`, a model's variants are pooled and the variant reads `all`."""
    lines: list[MetricLine] = []
    for family, rows in select(rows_by_family, keep).rows.items():
        groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for row in rows:
            if row.get("status") != "ok":
                continue
            per_item = _item_metrics(row)
            if not per_item:
                continue
            variant = str(row.get("variant") or "-") if by_variant else "all"
            group = (str(row.get("model")), variant)
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

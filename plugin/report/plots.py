"""The report's PNG plots (matplotlib, Agg): a bar chart with 95% CI whiskers per family, RSS by
sequence length, metrics per variant (code retrieval: per chunking strategy), and zELO
preference heatmaps (drawn by `plugin.report.heatmap`).

Each model keeps one colour across every plot.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plugin.leaderboard import MetricLine, scored_iterations
from plugin.report.tables import FamilyTable

DPI = 100
Row = dict[str, Any]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def colours(models: Sequence[str]) -> dict[str, Any]:
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    return {model: palette(index % 10) for index, model in enumerate(sorted(set(models)))}


def _save(figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(figure)
    return path


def family_bars(path: Path, table: FamilyTable, palette: dict[str, Any]) -> Path | None:
    """The family's headline mean per model, best first, with its 95% CI as a whisker."""
    lines = [line for line in table.lines if line.mean is not None]
    if not lines:
        return None
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(max(3.5, 1.0 * len(lines) + 1.5), 3.2))
    means = [line.mean or 0.0 for line in lines]
    below = [(line.mean or 0.0) - (line.low if line.low is not None else line.mean or 0.0) for line in lines]
    above = [(line.high if line.high is not None else line.mean or 0.0) - (line.mean or 0.0) for line in lines]
    labels = [line.model + (" †" if line.errors else "") for line in lines]  # the model has errors
    positions = range(len(lines))
    axes.bar(positions, means, color=[palette[line.model] for line in lines], width=0.6)
    axes.errorbar(positions, means, yerr=[below, above], fmt="none", ecolor="black", capsize=5, linewidth=1)
    for position, line in zip(positions, lines, strict=True):
        axes.annotate(f"n={line.n}", (position, 0), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    axes.set_xticks(list(positions), labels=labels)
    axes.set_ylabel("mean, 95% CI")
    axes.set_title(f"{table.family}\n{table.headline}", fontsize=9)
    axes.axhline(0, color="grey", linewidth=0.5)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return _save(figure, path)


def rss_by_length(path: Path, rows: list[Row], palette: dict[str, Any]) -> Path | None:
    """Mean RSS per sequence length: a panel per case, a line per model and mode (variant)."""
    series: dict[str, dict[tuple[str, str], dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for row in rows:
        for entry in scored_iterations(row):
            by_length = entry.get("by_length")
            if not isinstance(by_length, dict):
                continue
            label = str(row.get("variant") or entry.get("mode") or "-")
            for length, values in by_length.items():
                if isinstance(values, dict) and isinstance(values.get("rss"), int | float):
                    key = (str(row.get("model")), label)
                    series[str(row.get("case"))][key][int(length)].append(float(values["rss"]))
    if not series:
        return None
    plt = _pyplot()
    cases = sorted(series)
    columns = min(3, len(cases))
    rows_of_panels = math.ceil(len(cases) / columns)
    figure, grid = plt.subplots(
        rows_of_panels, columns, figsize=(4.2 * columns, 3.2 * rows_of_panels), squeeze=False, sharey=True
    )
    styles = ["-", "--", ":", "-."]
    for index, case in enumerate(cases):
        axes = grid[index // columns][index % columns]
        labels = sorted({label for _, label in series[case]})
        for (model, label), points in sorted(series[case].items()):
            lengths = sorted(points)
            means = [sum(points[n]) / len(points[n]) for n in lengths]
            style = styles[labels.index(label) % len(styles)]
            axes.plot(lengths, means, style, marker="o", color=palette[model], label=f"{model} {label}", markersize=4)
        axes.set_title(case, fontsize=9)
        axes.set_xlabel("sequence length (chunks)")
        axes.axhline(0, color="grey", linewidth=0.5)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    for index in range(len(cases), rows_of_panels * columns):
        grid[index // columns][index % columns].set_visible(False)
    grid[0][0].set_ylabel("mean RSS")
    figure.suptitle("rss_probes: RSS by sequence length", fontsize=10)
    figure.tight_layout()
    return _save(figure, path)


def metrics_by_variant(path: Path, family: str, lines: list[MetricLine], palette: dict[str, Any]) -> Path | None:
    """A panel per metric: its mean per variant (code retrieval: chunking strategy), a bar per
    model, with 95% bootstrap CI whiskers."""
    if not lines:
        return None
    plt = _pyplot()
    names = sorted({name for line in lines for name in line.values})
    variants = sorted({line.variant for line in lines})
    models = sorted({line.model for line in lines})
    columns = min(4, len(names))
    rows_of_panels = math.ceil(len(names) / columns)
    figure, grid = plt.subplots(
        rows_of_panels, columns, figsize=(3.3 * columns, 2.8 * rows_of_panels), squeeze=False, sharey=True
    )
    width = 0.8 / len(models)
    found = {(line.model, line.variant): line for line in lines}
    for index, name in enumerate(names):
        axes = grid[index // columns][index % columns]
        for offset, model in enumerate(models):
            xs, means, below, above = [], [], [], []
            for position, variant in enumerate(variants):
                line = found.get((model, variant))
                if line is None or name not in line.values:
                    continue
                mean, low, high = line.values[name]
                xs.append(position - 0.4 + width * (offset + 0.5))
                means.append(mean)
                below.append(mean - low)
                above.append(high - mean)
            axes.bar(xs, means, width=width, color=palette[model], label=model)
            axes.errorbar(xs, means, yerr=[below, above], fmt="none", ecolor="black", capsize=2, linewidth=0.8)
        axes.set_xticks(range(len(variants)), labels=variants, fontsize=8)
        axes.set_title(name, fontsize=9)
        axes.grid(axis="y", alpha=0.3)
    for index in range(len(names), rows_of_panels * columns):
        grid[index // columns][index % columns].set_visible(False)
    handles, labels = grid[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper right", fontsize=8)
    figure.suptitle(f"{family}: every metric per variant, 95% bootstrap CI", fontsize=10)
    figure.tight_layout(rect=(0, 0, 0.93, 1))
    return _save(figure, path)


def zelo_heatmaps(out_dir: Path, rows: list[Row], items: Sequence[str] | None) -> list[tuple[str, str, Path]]:
    """The pairwise-preference heatmap of each chosen item, for every model that judged it:
    (item, model, path). By default the first item that the most models judged."""
    from plugin.report import heatmap

    judged: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        entry = next((e for e in scored_iterations(row) if "zelo" in e and "battles" in e), None)
        if entry is not None:
            judged[str(row.get("item"))][str(row.get("model"))] = entry
    if not judged:
        return []
    chosen = list(items) if items else [min(judged, key=lambda item: (-len(judged[item]), item))]
    drawn = []
    for item in chosen:
        for model, entry in sorted(judged.get(item, {}).items()):
            zelo = {d: float(v) for d, v in entry["zelo"].items()}
            battles = [(a, b, score) for a, b, score in entry["battles"]]
            path = out_dir / f"zelo_heatmap_{_file_part(item)}_{_file_part(model)}.png"
            heatmap.draw(path, zelo, battles, f"{item} - {model}", dpi=DPI)
            drawn.append((item, model, path))
    return drawn


def _file_part(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)

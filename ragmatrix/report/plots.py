"""The report's PNG plots that every family gets (matplotlib, Agg): a bar chart with 95% CI
whiskers, and every metric per variant (code retrieval: per chunking strategy). A family's
own plots are declared on its descriptor (`Family.plots`) and drawn with the same helpers
(`ragmatrix.seam.drawing`).

Each model keeps one colour across every plot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from ragmatrix.seam.drawing import Colour, pyplot, save, short_label
from ragmatrix.seam.tables import FamilyTable, MetricLine


def colours(models: Sequence[str]) -> dict[str, Colour]:
    """One colour per model, the same in every plot of a report."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    return {model: palette(index % 10) for index, model in enumerate(sorted(set(models)))}


def family_bars(path: Path, table: FamilyTable, palette: dict[str, Colour]) -> Path | None:
    """The family's headline mean per model, best first, with its 95% CI as a whisker."""
    lines = [line for line in table.lines if line.mean is not None]
    if not lines:
        return None
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(max(3.5, 1.0 * len(lines) + 1.5), 3.2))
    means = [line.mean or 0.0 for line in lines]
    below = [(line.mean or 0.0) - (line.low if line.low is not None else line.mean or 0.0) for line in lines]
    above = [(line.high if line.high is not None else line.mean or 0.0) - (line.mean or 0.0) for line in lines]
    labels = [short_label(line.model) + (" †" if line.errors else "") for line in lines]  # the model has errors
    positions = range(len(lines))
    axes.bar(positions, means, color=[palette[line.model] for line in lines], width=0.6)
    axes.errorbar(positions, means, yerr=[below, above], fmt="none", ecolor="black", capsize=5, linewidth=1)
    for position, line in zip(positions, lines, strict=True):
        axes.annotate(f"n={line.n}", (position, 0), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    axes.set_xticks(list(positions), labels=labels)
    axes.set_ylabel("mean, 95% CI")
    axes.set_title(f"{table.family}\n{table.headline.description} ({table.headline.scale})", fontsize=9)
    axes.axhline(0, color="grey", linewidth=0.5)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return save(figure, path)


def metrics_by_variant(path: Path, family: str, lines: list[MetricLine], palette: dict[str, Colour]) -> Path | None:
    """A panel per metric: its mean per variant (code retrieval: chunking strategy), a bar per
    model, with 95% bootstrap CI whiskers."""
    if not lines:
        return None
    plt = pyplot()
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
                value = line.values[name]
                mean = value.mean
                low = value.low if value.low is not None else mean
                high = value.high if value.high is not None else mean
                xs.append(position - 0.4 + width * (offset + 0.5))
                means.append(mean)
                below.append(mean - low)
                above.append(high - mean)
            axes.bar(xs, means, width=width, color=palette[model], label=short_label(model))
            axes.errorbar(xs, means, yerr=[below, above], fmt="none", ecolor="black", capsize=2, linewidth=0.8)
        axes.set_xticks(range(len(variants)), labels=variants, fontsize=8)
        axes.set_title(name, fontsize=9)
        axes.grid(axis="y", alpha=0.3)
    for index in range(len(names), rows_of_panels * columns):
        grid[index // columns][index % columns].set_visible(False)
    handles, labels = grid[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper right", fontsize=8)
    figure.suptitle(f"{family}: every metric per variant, 95% CI", fontsize=10)
    figure.tight_layout(rect=(0, 0, 0.93, 1))
    return save(figure, path)

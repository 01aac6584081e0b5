"""The RSS probes' own part of the report: RSS per item and by sequence length, and its plot.
matplotlib is imported when the plot is drawn, never when the family is loaded."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from pydantic import ConfigDict

from ragmatrix.foundations.data_model import DataModel
from ragmatrix.results.rows import Iteration
from ragmatrix.seam.blocks import Block, Heading, Image, Paragraph, Table
from ragmatrix.seam.drawing import PlotContext, pyplot, save, short_label
from ragmatrix.seam.tables import FamilyTable

PLOT = "rss_by_length.png"


class RssDetails(DataModel):
    """What an RSS iteration records besides its score, as far as the report reads it."""

    model_config = ConfigDict(extra="ignore")

    mode: str = "-"
    chunking: str = "-"
    rss_ci95: tuple[float, float] | None = None  # a bootstrap over the item's samples
    by_length: dict[int, dict[str, float | None]] = {}  # length -> {"rss": ..., "td": ..., "bu": ...}
    latency_ms: dict[str, float | int | None] = {}  # "total", "synthesis": a sample's mean, in ms
    device: str | None = None

    def rss_by_length(self) -> dict[int, float]:
        return {length: float(rss) for length, v in self.by_length.items() if (rss := v.get("rss")) is not None}


def _details(entry: Iteration) -> RssDetails:
    try:
        return RssDetails.model_validate(entry.details)
    except ValueError:
        return RssDetails()  # an older row's shape: nothing to show, nothing to crash on


def _by_length(entry: Iteration) -> dict[int, float]:
    """An iteration's mean RSS per sequence length."""
    return _details(entry).rss_by_length()


def draw(out_dir: Path, table: FamilyTable, context: PlotContext) -> list[Path]:
    """Mean RSS per sequence length: a panel per case, a line per model and mode (variant)."""
    series: dict[str, dict[tuple[str, str], dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for row in table.rows:
        for entry in row.scored_iterations():
            label = row.variant or _details(entry).mode
            for length, rss in _by_length(entry).items():
                series[row.case][(row.model, label)][length].append(rss)
    if not series:
        return []
    plt = pyplot()
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
            colour = context.palette[model]
            shown = f"{short_label(model)} {label}"
            axes.plot(lengths, means, style, marker="o", color=colour, label=shown, markersize=4)
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
    return [save(figure, out_dir / PLOT)]


def _ms(value: float | int | None) -> str:
    return "-" if value is None else f"{float(value):.1f}"


def section(table: FamilyTable, images: list[str]) -> list[Block]:
    """RSS per item with its interval over samples, and the mean RSS at each length."""
    lengths: set[int] = set()
    found = []
    for row in table.rows:
        entries = row.scored_iterations()
        if not entries:
            continue
        per_length: dict[int, list[float]] = defaultdict(list)
        for entry in entries:
            for length, rss in _by_length(entry).items():
                per_length[length].append(rss)
        lengths.update(per_length)
        interval = _details(entries[0]).rss_ci95 if len(entries) == 1 else None
        found.append((row, entries[0], {n: sum(v) / len(v) for n, v in per_length.items()}, interval))
    if not found:
        return []
    columns = sorted(lengths)
    header = ["model", "item", "mode", "chunks", "RSS", "95% CI (samples)", *[f"L={n}" for n in columns]]
    header += ["total_latency ms", "synthesis_latency ms", "device"]
    rows = []
    for row, entry, by_length, interval in sorted(found, key=lambda f: (f[0].item, f[0].model)):
        details = _details(entry)
        rows.append(
            [
                row.model,
                row.item,
                details.mode,
                details.chunking,
                "-" if row.score is None else f"{float(row.score):.1f}",
                f"[{interval[0]:.1f}, {interval[1]:.1f}]" if interval is not None else "-",
                *[f"{by_length[n]:.1f}" if n in by_length else "-" for n in columns],
                *[_ms(details.latency_ms.get(name)) for name in ("total", "synthesis")],
                details.device or "-",
            ]
        )
    blocks: list[Block] = [
        Heading(3, "rss_probes: RSS per item, and by sequence length"),
        Paragraph(
            "The interval of an item is a bootstrap over its samples; `L=n` is the mean RSS of the "
            "samples of n chunks. A model's native RSS falls with length once the text outgrows its "
            "context; merger mode never reads long text. `total_latency` and `synthesis_latency` are "
            "Finesse's latencies, under its names: a sample's mean milliseconds for all its embedding "
            "work, and for its syntheses alone (the prefix embeddings, or the merge), measured once per "
            "model and device on the device named; compare them only on one device."
        ),
        Table(header, rows, numeric=set(range(4, len(header) - 1))),
    ]
    blocks += [Image(image, "rss_probes: mean RSS by sequence length, a line per model and mode") for image in images]
    return blocks

"""How the report's PNGs are drawn, by the report and by a family's own plots alike: matplotlib
loaded only when something is drawn (Agg, no display), one resolution, and files saved without
a timestamp, so that the same results give the same bytes. `PlotContext` is what a family's
plot is given besides its table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DPI = 100

# A matplotlib colour: red, green, blue and alpha in 0..1.
Colour = tuple[float, float, float, float]


@dataclass
class PlotContext:
    """What a family's plot may need besides its table."""

    palette: dict[str, Colour]  # one colour per model, the same in every plot of the report
    heatmaps: Sequence[str] = ()  # zelo_battles items chosen with --heatmap


def pyplot() -> Any:
    """matplotlib's pyplot, on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(figure: Any, path: Path) -> Path:
    """Write the figure as a PNG (its folder made if need be) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(figure)
    return path


def file_part(name: str) -> str:
    """A model or item name as part of a file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)

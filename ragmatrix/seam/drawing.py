"""How the report's PNGs are drawn, by the report and by a family's own plots alike: matplotlib
loaded only when something is drawn (Agg, no display), one resolution, and files saved without
a timestamp, so that the same results give the same bytes. `PlotContext` is what a family's
plot is given besides its table.
"""

from __future__ import annotations

import hashlib
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
    # Names come from data (a model id, a case): `$...$` in one is text, never mathtext, which
    # would refuse `$\\frac{1}{$` and draw `$a$ and $b$` as formulas.
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def save(figure: Any, path: Path) -> Path:
    """Write the figure as a PNG (its folder made if need be) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(figure)
    return path


# The most characters of a name drawn as a label: a longer one is cut, so that it leaves room for the plot.
LABEL_CHARS = 40


def short_label(name: str) -> str:
    """A model or item name as a plot draws it."""
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"


# The most bytes a name takes in a file name: file systems allow 255 for the whole name.
FILE_PART_CHARS = 80


def file_part(name: str) -> str:
    """A model or item name as part of a file name: other characters become `_`, and a long
    name is cut, with a digest of the whole so that two long names stay two files."""
    part = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    if len(part.encode("utf-8")) <= FILE_PART_CHARS:
        return part
    digest = hashlib.md5(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    cut = part.encode("utf-8")[: FILE_PART_CHARS - 11].decode("utf-8", "ignore")
    return f"{cut}-{digest}"

"""The K x K pairwise-preference matrix of one query, sorted by zELO, as a PNG: drawn by the
report for the zELO family (`ragmatrix.families.zelo_battles.report`) and by `ragmatrix heatmap`.

Cell (i, j) is the mean preference for document i over document j over every judgement of the
pair, from -1 (red: j preferred) to 1 (green: i preferred); the matrix is antisymmetric. Pairs
never judged stay grey: random cycles judge about 2 x cycles pairs per document, not all K^2.
Rows and columns are sorted by zELO, best first, so a consistent judge gives a matrix that is
green above the diagonal and red below it, and a good document is a green row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path


def preference_matrix(ids: list[str], battles: Iterable[tuple[str, str, float | None]]) -> list[list[float | None]]:
    """M[i][j] for documents `ids`, from judgements (a, b, score), score > 0 meaning b is more
    relevant. Judgements of documents not in `ids`, or without a score, are ignored."""
    index = {d: i for i, d in enumerate(ids)}
    sums = [[0.0] * len(ids) for _ in ids]
    counts = [[0] * len(ids) for _ in ids]
    for a, b, score in battles:
        if score is None or a not in index or b not in index or a == b:
            continue
        i, j = index[a], index[b]
        sums[i][j] -= score  # a over b
        sums[j][i] += score
        counts[i][j] += 1
        counts[j][i] += 1
    return [[sums[i][j] / counts[i][j] if counts[i][j] else None for j in range(len(ids))] for i in range(len(ids))]


def draw(
    path: Path,
    zelo: Mapping[str, float],
    battles: Iterable[tuple[str, str, float | None]],
    title: str = "",
    dpi: int = 120,
) -> Path:
    """Write the heatmap of the documents in `zelo` (id -> zELO) to `path` (a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ids = sorted(zelo, key=lambda d: (-zelo[d], d))
    matrix = preference_matrix(ids, battles)
    values = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    size = max(4.0, 0.45 * len(ids) + 2.5)
    figure, axes = plt.subplots(figsize=(size + 1.2, size))
    colours = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#dddddd")
    image = axes.imshow(np.ma.masked_invalid(values), cmap=colours, vmin=-1.0, vmax=1.0)
    labels = [f"{d} ({zelo[d]:+.2f})" for d in ids]
    axes.set_xticks(range(len(ids)), labels=ids, rotation=90, fontsize=8)
    axes.set_yticks(range(len(ids)), labels=labels, fontsize=8)
    axes.set_xlabel("document (column)")
    axes.set_ylabel("document (row), zELO")
    if title:
        axes.set_title(title if len(title) <= 80 else title[:77] + "...", fontsize=10)
    bar = figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    bar.set_label("preference for the row over the column")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(figure)
    return path

"""The zELO battles' own part of the report: each judge's pairwise-preference heatmap for the
chosen queries. matplotlib is imported when a heatmap is drawn, never when the family is loaded."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ragmatrix.seam.blocks import Block, Heading, Image, Paragraph
from ragmatrix.seam.drawing import DPI, PlotContext, file_part
from ragmatrix.seam.tables import FamilyTable
from ragmatrix.zelo import heatmap
from ragmatrix.zelo.battles import ZeloDetails, zelo_details

PATTERN = "zelo_heatmap_*.png"


def draw(out_dir: Path, table: FamilyTable, context: PlotContext) -> list[Path]:
    """The heatmap of each chosen item (`report --heatmap ITEM`), for every model that judged
    it; by default the first item that the most models judged."""
    judged: dict[str, dict[str, ZeloDetails]] = defaultdict(dict)
    for row in table.rows:
        found = next((d for e in row.scored_iterations() if (d := zelo_details(e.details)) is not None), None)
        if found is not None:
            judged[row.item][row.model] = found
    if not judged:
        return []
    chosen = list(context.heatmaps) if context.heatmaps else [min(judged, key=lambda item: (-len(judged[item]), item))]
    drawn = []
    for item in chosen:
        for model, found in sorted(judged.get(item, {}).items()):
            path = out_dir / f"zelo_heatmap_{file_part(item)}_{file_part(model)}.png"
            heatmap.draw(path, found.zelo, list(found.battles), f"{item} - {model}", dpi=DPI)
            drawn.append(path)
    return drawn


def section(table: FamilyTable, images: list[str]) -> list[Block]:
    if not images:
        return []
    blocks: list[Block] = [
        Heading(3, "zelo_battles: pairwise preferences"),
        Paragraph(
            "Each judge's K x K preference matrix for one query, sorted by zELO, best first: green means "
            "the row's document is preferred, red the column's, grey a pair never judged. Choose the "
            "queries with `ragmatrix report --heatmap ITEM` (the case, and `:variant` for an LLM's "
            "prompt variant)."
        ),
    ]
    for image in images:
        blocks.append(Image(image, f"zELO preferences: {image.removeprefix('zelo_heatmap_').removesuffix('.png')}"))
    return blocks

"""The leaderboard report: `benchmark/results/*.jsonl` -> leaderboard.md, leaderboard.html and PNG plots.

- `tables`: the numbers (leaderboard lines, metrics, paired tests, the overview);
- `plots`: the PNGs (matplotlib);
- `content`: what the report says, as blocks; `document`: the blocks as markdown and HTML;
- `compare`: what changed between two result sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from plugin.report.tables import Tables, gather, load

MARKDOWN = "leaderboard.md"
HTML = "leaderboard.html"
# The PNGs this report writes; others of these names in the folder are from an earlier report.
PLOT_PATTERNS = ("bars_*.png", "by_variant_*.png", "rss_by_length.png", "zelo_heatmap_*.png")


@dataclass
class Written:
    tables: Tables
    markdown: Path
    html: Path
    plots: list[Path] = field(default_factory=list)
    changes: list[str] | None = None  # with a comparison: what changed


def write_report(
    results_dir: Path,
    out_dir: Path,
    shown_as: str | None = None,
    compare_dir: Path | None = None,
    heatmaps: Sequence[str] | None = None,
) -> Written:
    """Read the results, write the report into `out_dir`. `shown_as` names the results folder
    in the report (default: its name)."""
    from plugin import checksum
    from plugin.report import content, document, plots
    from plugin.report.compare import changes

    rows, problems = load(results_dir)
    tables = gather(rows, problems)
    out_dir.mkdir(parents=True, exist_ok=True)
    for pattern in PLOT_PATTERNS:
        for old in out_dir.glob(pattern):
            old.unlink()

    drawn = content.Plots()
    palette = plots.colours([line.model for t in tables.families for line in t.lines])
    written: list[Path] = []
    for table in tables.families:
        path = plots.family_bars(out_dir / f"bars_{table.family}.png", table, palette)
        if path is not None:
            drawn.bars[table.family] = path.name
            written.append(path)
        if table.metrics_by_variant:
            name = f"by_variant_{table.family}.png"
            path = plots.metrics_by_variant(out_dir / name, table.family, table.metrics_by_variant, palette)
            if path is not None:
                drawn.by_variant[table.family] = path.name
                written.append(path)
    rss = tables.family("rss_probes")
    if rss is not None:
        path = plots.rss_by_length(out_dir / "rss_by_length.png", rss.rows, palette)
        if path is not None:
            drawn.rss = path.name
            written.append(path)
    zelo = tables.family("zelo_battles")
    if zelo is not None:
        for item, model, path in plots.zelo_heatmaps(out_dir, zelo.rows, heatmaps):
            drawn.heatmaps.append((item, model, path.name))
            written.append(path)

    context = content.Context(results=shown_as or results_dir.name, checksum=checksum.status_line(results_dir))
    found: list[str] | None = None
    if compare_dir is not None:
        old_rows, _ = load(compare_dir)
        found = changes(gather(old_rows), tables)
        context.compared_with, context.changes = str(compare_dir), found
    blocks = content.build(tables, drawn, context)
    markdown = out_dir / MARKDOWN
    markdown.write_text(document.markdown(blocks), encoding="utf-8")
    page = out_dir / HTML
    page.write_text(document.html_page(blocks, out_dir, "ragmatrix leaderboard"), encoding="utf-8")
    return Written(tables, markdown, page, written, found)

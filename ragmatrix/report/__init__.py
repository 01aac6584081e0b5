"""The leaderboard report: `benchmark/results/*.jsonl` -> leaderboard.md, leaderboard.html and PNGs.

- `aggregate`: the numbers, once (lines, intervals, paired tests, metrics, breakdowns), as the
  data of `ragmatrix.seam.tables`;
- `terminal`: the numbers as text for pytest's summary;
- `content`: what the report says, as blocks; `document`: the blocks as markdown and HTML;
- `plots`: the plots every family gets; a family's own plots and sections are on its descriptor;
- `compare`: what changed between two result sets.

The report reads the families through the descriptors it is given (`ragmatrix.seam.family.Family`)
and never looks them up: whoever calls it (the pytest plugin, the command line) passes them.
Nothing heavy is imported with this package: the terminal summary of a cached run uses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragmatrix.report.memo import Memo
    from ragmatrix.results.rows import Row
    from ragmatrix.seam.family import Family
    from ragmatrix.seam.tables import Tables

MARKDOWN = "leaderboard.md"
HTML = "leaderboard.html"
# The PNGs every report writes; a family's own are named by its descriptor's plots.
PLOT_PATTERNS = ("bars_*.png", "by_variant_*.png", "tradeoff_*.png")
MEMO = "stats.json"


@dataclass
class Written:
    tables: Tables
    markdown: Path
    html: Path
    json: Path | None = None  # leaderboard.json
    plots: list[Path] = field(default_factory=list)
    changes: list[str] | None = None  # with a comparison: what changed
    notes: list[str] = field(default_factory=list)  # unreadable cost records, a models file without prices


def load(results_dir: Path) -> tuple[dict[str, list[Row]], list[str]]:
    """Every family's rows in a results folder, and the problems found reading them."""
    from ragmatrix.results.store import ResultStore

    loaded = ResultStore(results_dir).load_all()
    problems = [problem for family in loaded.values() for problem in family.problems]
    return {family: data.rows for family, data in loaded.items() if data.rows}, problems


def remembered_stats() -> Memo:
    """The remembered intervals and tests of this checkout (see `ragmatrix.report.memo`)."""
    from ragmatrix.foundations.cache import cache_dir
    from ragmatrix.report.memo import Memo

    return Memo(cache_dir() / MEMO)


def write_report(
    results_dir: Path,
    out_dir: Path,
    families: Mapping[str, Family],
    shown_as: str | None = None,
    compare_dir: Path | None = None,
    heatmaps: Sequence[str] | None = None,
    models_file: Path | None = None,
    reprice: bool = False,
) -> Written:
    """Read the results, write the report into `out_dir`, each family read through its
    descriptor in `families`. `shown_as` names the results folder in the report (default: its
    name). The LLMs' tokens are priced at the prices their cost records keep; `models_file`
    prices what no record keeps a price for, and with `reprice` it prices everything."""
    from ragmatrix.foundations.secrets import redact
    from ragmatrix.report import content, document, leaderboard_json, plots, tradeoff
    from ragmatrix.report.aggregate import aggregate
    from ragmatrix.report.compare import changes
    from ragmatrix.report.cost import load_costs
    from ragmatrix.results import checksum
    from ragmatrix.seam.drawing import PlotContext

    rows, problems = load(results_dir)
    remembered = remembered_stats()
    tables = aggregate(rows, families, problems, memo=remembered)
    costs, notes = load_costs(tables, results_dir, models_file, reprice)
    out_dir.mkdir(parents=True, exist_ok=True)
    own = {t.family: families[t.family] for t in tables.families if t.family in families}
    patterns = [*PLOT_PATTERNS]
    patterns += [p for descriptor in own.values() for plot in descriptor.plots for p in plot.patterns]
    for pattern in patterns:
        for old in out_dir.glob(pattern):
            old.unlink()

    drawn = content.Plots()
    context = PlotContext(plots.colours([line.model for t in tables.families for line in t.lines]), heatmaps or ())
    written: list[Path] = []
    for table in tables.families:
        path = plots.family_bars(out_dir / f"bars_{table.family}.png", table, context.palette)
        if path is not None:
            drawn.bars[table.family] = path.name
            written.append(path)
        if table.metrics_by_variant:
            name = f"by_variant_{table.family}.png"
            path = plots.metrics_by_variant(out_dir / name, table.family, table.metrics_by_variant, context.palette)
            if path is not None:
                drawn.by_variant[table.family] = path.name
                written.append(path)
        path = tradeoff.draw(out_dir / f"tradeoff_{table.family}.png", table, costs[table.family], context.palette)
        if path is not None:
            drawn.tradeoff[table.family] = path.name
            written.append(path)
        for plot in own[table.family].plots if table.family in own else ():
            paths = plot.draw(out_dir, table, context)
            drawn.own.setdefault(table.family, []).extend(p.name for p in paths)
            written += paths

    report_context = content.Context(
        results=shown_as or results_dir.name, checksum=checksum.status_line(results_dir), costs=costs, families=own
    )
    found: list[str] | None = None
    if compare_dir is not None:
        old_rows, _ = load(compare_dir)
        found = changes(aggregate(old_rows, families, memo=remembered, variants=False), tables)
        report_context.compared_with, report_context.changes = str(compare_dir), found
    remembered.save()
    blocks = content.build(tables, drawn, report_context)
    markdown = out_dir / MARKDOWN
    # Rows hold no secrets, but rows written by an older version, or merged in, might.
    markdown.write_text(redact(document.markdown(blocks)), encoding="utf-8")
    page = out_dir / HTML
    page.write_text(redact(document.html_page(blocks, out_dir, "ragmatrix leaderboard")), encoding="utf-8")
    board = out_dir / leaderboard_json.FILE_NAME
    board.write_text(
        redact(leaderboard_json.to_text(leaderboard_json.build(tables, costs, shown_as or results_dir.name)))
    )
    return Written(tables, markdown, page, board, written, found, notes)

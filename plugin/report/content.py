"""What the report says, as blocks (see `plugin.report.document`): the reading guide, the
overview, what was left out, and per family its table, paired tests, metrics and plots."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from plugin.leaderboard import MetricLine, scored_iterations
from plugin.report.document import Block, Bullets, Heading, Image, Paragraph, Table
from plugin.report.tables import RANK_RULE, Comparison, FamilyTable, Tables
from plugin.stats.significance import ALPHA, MCNEMAR

BETTER = ">"  # significantly better than the model ranked next
SAME = "≈"  # no significant difference
INCOMPLETE = "†"  # the model has error items: its mean covers only the items it finished
METRICS_PER_TABLE = 4


@dataclass
class Plots:
    """The PNGs drawn for the report, by file name in the report folder."""

    bars: dict[str, str] = field(default_factory=dict)  # family -> file
    by_variant: dict[str, str] = field(default_factory=dict)  # family -> file
    rss: str | None = None
    heatmaps: list[tuple[str, str, str]] = field(default_factory=list)  # (item, model, file)


@dataclass
class Context:
    results: str  # the results folder, as the user named it
    checksum: str | None = None  # one line on the checksum file, when there is one
    compared_with: str | None = None
    changes: list[str] = field(default_factory=list)


def build(tables: Tables, plots: Plots, context: Context) -> list[Block]:
    blocks: list[Block] = [Heading(1, "ragmatrix leaderboard")]
    rows = sum(len(t.rows) for t in tables.families)
    models = len(tables.overview)
    intro = (
        f"{rows} result rows from `{context.results}`: {len(tables.families)} families, {models} models"
        + (f", recorded up to {tables.newest}" if tables.newest else "")
        + ". Written by `python -m plugin report`."
    )
    blocks.append(Paragraph(intro))
    if context.checksum:
        blocks.append(Paragraph(context.checksum))
    blocks += _reading_guide()
    blocks += _overview(tables)
    blocks += _left_out(tables)
    if context.compared_with is not None:
        blocks.append(Heading(2, f"Changes since `{context.compared_with}`"))
        blocks.append(Bullets(context.changes) if context.changes else Paragraph("Nothing changed."))
    for table in tables.families:
        blocks += _family(table, plots)
    return blocks


def _reading_guide() -> list[Block]:
    return [
        Heading(2, "How to read it"),
        Bullets(
            [
                "**mean** is the family's headline score over every scored iteration of a model's items. "
                "**95% CI**: a Wilson score interval when every score is 0 or 1 (a yes/no outcome), else a "
                "percentile bootstrap interval of the mean (2,000 seeded resamples). When a case gives "
                "several values (prompt variants, chunkings, iterations) and there are at least 5 cases, the "
                "bootstrap resamples whole cases, since a case's values are not independent. **n** counts scored "
                "iterations, **items** the model's items, **errors** the items that ended in a model error, "
                "**invalid** the answers that could not be parsed (they score 0).",
                "An interval describes one model's mean. Overlapping intervals do not make two models equal, "
                "and the paired tests are the comparison: they compare two models on the same items.",
                f"**Significance**: every pair of models in a family is tested on the items both finished: "
                f"McNemar's exact test when every paired score is 0 or 1, else a paired permutation test of "
                f"the mean difference. p-values are Holm-adjusted over the family's pairs. `{BETTER} model` "
                f"marks a model significantly better than the next one down (adjusted p < {ALPHA}), "
                f"`{SAME} model` a difference that is not significant.",
                f"**Errors** are never zeros. A model error leaves the item out of the mean and counts under "
                f"errors; a model marked {INCOMPLETE} has errors, and its mean covers only the items it "
                f"finished. Paired tests use only the items both models finished.",
            ]
        ),
    ]


def _overview(tables: Tables) -> list[Block]:
    families = [t.family for t in tables.families]
    header = ["#", "model", "mean rank", *families]
    rows = []
    for index, line in enumerate(tables.overview, start=1):
        cells = []
        for family in families:
            cell = line.cells.get(family)
            if cell is None:
                cells.append("-")
            elif cell.mean is None:
                cells.append(f"no score ({cell.errors} errors)")
            else:
                mark = f" {INCOMPLETE}" if cell.errors else ""
                cells.append(f"{cell.mean:.3f} (#{line.ranks[family]}){mark}")
        mean_rank = "-" if line.mean_rank is None else f"{line.mean_rank:.2f}"
        rows.append([str(index), line.model, mean_rank, *cells])
    return [
        Heading(2, "Overview"),
        Paragraph(f"Each cell is the model's mean in the family and its rank there. {RANK_RULE}"),
        Table(header, rows, numeric={0, 2, *range(3, 3 + len(families))}),
    ]


def _left_out(tables: Tables) -> list[Block]:
    items = [left.note() for left in tables.left_out]
    items += [f"unreadable: {problem}" for problem in tables.problems]
    return [
        Heading(2, "Left out"),
        Paragraph(
            "Rows of an older scoring version, or run with another number of iterations than the rest of "
            "a model's rows in the family, never enter a mean."
        ),
        Bullets(items) if items else Paragraph("Nothing was left out."),
    ]


def _family(table: FamilyTable, plots: Plots) -> list[Block]:
    blocks: list[Block] = [Heading(2, table.family), Paragraph(f"Headline score: {table.headline}.")]
    header = ["rank", "model", "mean", "95% CI", "n", "items", "errors", "invalid", "vs next"]
    rows = []
    for line in table.lines:
        rank = str(table.ranks[line.model]) if line.model in table.ranks else "-"
        model = line.model + (f" {INCOMPLETE}" if line.errors else "")
        mean = "-" if line.mean is None else f"{line.mean:.3f}"
        interval = "-" if line.low is None or line.high is None else f"[{line.low:.3f}, {line.high:.3f}]"
        counts = [str(line.n), str(line.items), str(line.errors), str(line.invalid)]
        rows.append([rank, model, mean, interval, *counts, _versus(table.versus_next(line.model))])
    blocks.append(Table(header, rows, numeric={0, 2, 3, 4, 5, 6, 7}))
    if table.family in plots.bars:
        blocks.append(Image(plots.bars[table.family], f"{table.family}: mean per model with its 95% CI"))
    blocks += _comparisons(table)
    if table.metrics:
        blocks.append(Heading(3, f"{table.family}: every metric, mean [95% bootstrap CI] over items"))
        blocks += _metric_tables(table.metrics, with_variant=False)
    if table.metrics_by_variant:
        blocks.append(Heading(3, f"{table.family}: every metric per variant"))
        blocks += _metric_tables(table.metrics_by_variant, with_variant=True)
        if table.family in plots.by_variant:
            blocks.append(Image(plots.by_variant[table.family], f"{table.family}: every metric per variant"))
    extra = EXTRAS.get(table.family)
    if extra is not None:
        blocks += extra(table, plots)
    return blocks


def _versus(comparison: Comparison | None) -> str:
    if comparison is None:
        return ""
    if comparison.test is None or comparison.p_holm is None:
        return f"no shared items with {comparison.b}"
    mark = BETTER if comparison.significant else SAME
    return f"{mark} {comparison.b} (p {_p(comparison.p_holm, relation=True)})"


def _comparisons(table: FamilyTable) -> list[Block]:
    if not table.comparisons:
        return []
    tested = sum(1 for c in table.comparisons if c.test is not None)
    header = ["model A", "model B", "paired on", "pairs", "mean A - B", "test", "p", "p (Holm)", "significant"]
    rows = []
    for c in table.comparisons:
        if c.test is None or c.p_holm is None:
            rows.append([c.a, c.b, "nothing shared", "0", "-", "-", "-", "-", "-"])
            continue
        test = c.test.test
        if c.test.test == MCNEMAR and c.test.discordant is not None:
            test += f", discordant {c.test.discordant[0]} vs {c.test.discordant[1]}"
        rows.append(
            [
                c.a,
                c.b,
                c.unit,
                str(c.test.n),
                f"{c.test.difference:+.3f}",
                test,
                _p(c.test.p),
                _p(c.p_holm),
                "yes" if c.significant else "no",
            ]
        )
    return [
        Paragraph(f"Paired tests between the models, Holm-adjusted over the family's {tested} test(s):"),
        Table(header, rows, numeric={3, 4, 6, 7}),
    ]


def _metric_tables(lines: list[MetricLine], with_variant: bool) -> list[Block]:
    names = sorted({name for line in lines for name in line.values})
    blocks: list[Block] = []
    for start in range(0, len(names), METRICS_PER_TABLE):
        columns = names[start : start + METRICS_PER_TABLE]
        first = ["model", "variant", "n"] if with_variant else ["model", "n"]
        rows = []
        for line in lines:
            cells = []
            for name in columns:
                value = line.values.get(name)
                cells.append("-" if value is None else f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]")
            first_cells = [line.model, line.variant] if with_variant else [line.model]
            rows.append([*first_cells, str(line.n), *cells])
        blocks.append(Table([*first, *columns], rows, numeric=set(range(len(first) - 1, len(first) + len(columns)))))
    return blocks


# --- what only some families have ---------------------------------------------------------------


def _rss(table: FamilyTable, plots: Plots) -> list[Block]:
    lengths: set[int] = set()
    found = []
    for row in table.rows:
        entries = scored_iterations(row)
        if not entries:
            continue
        per_length: dict[int, list[float]] = defaultdict(list)
        for entry in entries:
            for length, values in (entry.get("by_length") or {}).items():
                if isinstance(values, dict) and isinstance(values.get("rss"), int | float):
                    per_length[int(length)].append(float(values["rss"]))
        lengths.update(per_length)
        interval = entries[0].get("rss_ci95") if len(entries) == 1 else None
        found.append((row, entries[0], {n: sum(v) / len(v) for n, v in per_length.items()}, interval))
    if not found:
        return []
    columns = sorted(lengths)
    header = ["model", "item", "mode", "chunks", "RSS", "95% CI (samples)", *[f"L={n}" for n in columns]]
    rows = []
    for row, entry, by_length, interval in sorted(found, key=lambda f: (str(f[0].get("item")), str(f[0].get("model")))):
        score = row.get("score")
        rows.append(
            [
                str(row.get("model")),
                str(row.get("item")),
                str(entry.get("mode", "-")),
                str(entry.get("chunking", "-")),
                "-" if score is None else f"{float(score):.1f}",
                f"[{interval[0]:.1f}, {interval[1]:.1f}]" if isinstance(interval, list) and len(interval) == 2 else "-",
                *[f"{by_length[n]:.1f}" if n in by_length else "-" for n in columns],
            ]
        )
    blocks: list[Block] = [
        Heading(3, "rss_probes: RSS per item, and by sequence length"),
        Paragraph(
            "The interval of an item is a bootstrap over its samples; `L=n` is the mean RSS of the "
            "samples of n chunks. A model's native RSS falls with length once the text outgrows its "
            "context; merger mode never reads long text."
        ),
        Table(header, rows, numeric=set(range(4, len(header)))),
    ]
    if plots.rss:
        blocks.append(Image(plots.rss, "rss_probes: mean RSS by sequence length, a line per model and mode"))
    return blocks


def _zelo(table: FamilyTable, plots: Plots) -> list[Block]:
    if not plots.heatmaps:
        return []
    blocks: list[Block] = [
        Heading(3, "zelo_battles: pairwise preferences"),
        Paragraph(
            "Each judge's K x K preference matrix for one query, sorted by zELO, best first: green means "
            "the row's document is preferred, red the column's, grey a pair never judged. Choose the "
            "queries with `python -m plugin report --heatmap ITEM` (the case, and `:variant` for an LLM's "
            "prompt variant)."
        ),
    ]
    for item, model, file in plots.heatmaps:
        blocks.append(Image(file, f"zELO preferences of {model} on {item}"))
    return blocks


EXTRAS = {"rss_probes": _rss, "zelo_battles": _zelo}


def _p(p: float, relation: bool = False) -> str:
    """A p-value to three places; `relation` writes "= 0.031" or "< 0.001"."""
    if p < 0.001:
        return "< 0.001" if relation else "<0.001"
    return f"= {p:.3f}" if relation else f"{p:.3f}"

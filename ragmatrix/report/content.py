"""What the report says, as blocks (`ragmatrix.seam.blocks`, rendered by `ragmatrix.report.document`):
the reading guide, the overview, what was left out, and per family its table, paired tests,
metrics, plots and the family's own sections."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ragmatrix.cost.figures import FamilyCosts
from ragmatrix.report import cost
from ragmatrix.report.aggregate import MIN_SHARED_CASES, RANK_RULE
from ragmatrix.seam.blocks import Block, Bullets, Heading, Image, Paragraph, Table
from ragmatrix.seam.family import Family
from ragmatrix.seam.tables import INCOMPLETE, Comparison, FamilyTable, MetricLine, Tables
from ragmatrix.stats.intervals import MIN_CASES_TO_CLUSTER
from ragmatrix.stats.significance import ALPHA, MCNEMAR

BETTER = ">"  # significantly better than the model ranked next, on the cases both finished
WORSE = "<"  # significantly worse than it there (a higher mean over its own items notwithstanding)
SAME = "≈"  # no significant difference
METRICS_PER_TABLE = 4


@dataclass
class Plots:
    """The PNGs drawn for the report, by file name in the report folder."""

    bars: dict[str, str] = field(default_factory=dict)  # family -> file
    by_variant: dict[str, str] = field(default_factory=dict)  # family -> file
    own: dict[str, list[str]] = field(default_factory=dict)  # family -> files of its own plots
    tradeoff: dict[str, str] = field(default_factory=dict)  # family -> its quality-against-cost plot


@dataclass
class Context:
    results: str  # the results folder, as the user named it
    checksum: str | None = None  # one line on the checksum file, when there is one
    compared_with: str | None = None
    changes: list[str] = field(default_factory=list)
    costs: dict[str, FamilyCosts] = field(default_factory=dict)  # family -> its models' cost figures
    # The descriptors of the families whose own sections the report shows.
    families: Mapping[str, Family] = field(default_factory=dict)


def build(tables: Tables, plots: Plots, context: Context) -> list[Block]:
    blocks: list[Block] = [Heading(1, "ragmatrix leaderboard")]
    rows = sum(len(t.rows) for t in tables.families)
    models = len(tables.overview)
    intro = (
        f"{rows} result rows from `{context.results}`: {len(tables.families)} families, {models} models"
        + (f", recorded up to {tables.newest}" if tables.newest else "")
        + ". Written by `ragmatrix report`."
    )
    blocks.append(Paragraph(intro))
    if context.checksum:
        blocks.append(Paragraph(context.checksum))
    blocks += _reading_guide()
    blocks += _overview(tables)
    blocks += _provenance(tables)
    blocks += _left_out(tables)
    if context.compared_with is not None:
        blocks.append(Heading(2, f"Changes since `{context.compared_with}`"))
        blocks.append(Bullets(context.changes) if context.changes else Paragraph("Nothing changed."))
    for table in tables.families:
        descriptor = context.families.get(table.family)
        blocks += _family(table, plots, descriptor)
        blocks += cost.report_blocks(
            table,
            context.costs.get(table.family),
            plots.tradeoff.get(table.family),
            descriptor.cost_sections if descriptor is not None else (),
        )
    return blocks


def _reading_guide() -> list[Block]:
    return [
        Heading(2, "How to read it"),
        Bullets(
            [
                "**mean** is the family's headline score over every scored iteration of a model's items, on "
                "the scale each family's heading names. **n** counts scored iterations, **items** the model's "
                "items, **cases** the cases with a score, **errors** the items that ended in a model error, "
                "**invalid** the answers that could not be parsed (an invalid item scores 0; each of a zELO "
                "judge's invalid judgements counts, though its item may still have a score).",
                f"**Clusters.** A case often gives several items (prompt variants, chunkings, iterations); they "
                f"are not independent draws. So every interval resamples whole cases when some case gives "
                f"several values and there are at least {MIN_CASES_TO_CLUSTER} cases, and every paired test "
                f"pairs on per-case means. Otherwise: a Wilson interval when every value is 0 or 1, a "
                f"percentile bootstrap over the values (2,000 seeded resamples) when not; one continuous value "
                f"has no interval. Every number gets its interval this one way, in every table.",
                f"**Significance**: every pair of models in a family is tested on what both finished: McNemar's "
                f"exact test when every paired value is 0 or 1, else a paired permutation test of the mean "
                f"difference; p-values are Holm-adjusted over the family's pairs. With fewer than "
                f"{MIN_SHARED_CASES} shared cases there is no test: the table says 'too few shared cases'.",
                f"**Ranks.** Models are listed by mean, and the ranks never go back down the list: a model "
                f"shares the rank of the models above it, marked {SAME}, unless one of them is significantly "
                f"better on the cases both finished (Holm-adjusted p < {ALPHA}); then its rank is its place in "
                f"the list. No model shares the rank of one significantly better than it, and a higher mean "
                f"marked {SAME} is no win. **vs next** compares a model with the one listed next on the cases "
                f"both finished: {BETTER} significantly better, {WORSE} significantly worse (a model that erred "
                f"on the hard cases can lead by mean and still lose there), {SAME} no significant difference. A table "
                f"whose cases are too few for any difference to be significant has no ranks, and says so. A "
                f"model that ran fewer of its tests' cases or variants than the others is marked 'partial (k "
                f"of n cases)' or 'partial (k of n variants)' and is listed and ranked after every model with "
                f"full coverage, whatever its mean.",
                f"**Errors** are never zeros. A model error leaves the item out of the mean and counts under "
                f"errors; a model marked {INCOMPLETE} has errors, and its mean covers only the items it "
                f"finished.",
                "**Variants.** For each model with several variants (chunkings, prompt wordings, modes), its "
                "variants are tested against each other on the cases both ran, Holm-adjusted within the family.",
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
                mark = (f" {INCOMPLETE}" if cell.errors else "") + (" partial" if cell.partial else "")
                same = SAME if cell.same_as_above else ""
                rank = f"#{line.ranks[family]}{same}" if family in line.ranks else "unranked"
                cells.append(f"{cell.mean:.3f} ({rank}){mark}")
        mean_rank = "-" if line.mean_rank is None else f"{line.mean_rank:.2f}"
        rows.append([str(index), line.model, mean_rank, *cells])
    return [
        Heading(2, "Overview"),
        Paragraph(
            f"Each cell is the model's mean in the family and its rank there ('unranked' where the family "
            f"has too few cases to rank). {RANK_RULE}"
        ),
        Table(header, rows, numeric={0, 2, *range(3, 3 + len(families))}),
    ]


def _provenance(tables: Tables) -> list[Block]:
    """Which versions wrote the rows: row format, ragmatrix version and commit, with counts."""
    counts: Counter[tuple[int, str, str]] = Counter()
    for table in tables.families:
        for row in table.rows:
            found = row.provenance
            commit = "-" if not found.commit else f"`{found.commit[:12]}`" + (" (dirty)" if found.dirty else "")
            counts[(found.format, found.ragmatrix or "-", commit)] += 1
    if not counts:
        return []
    rows = [[str(n), str(fmt), version, commit] for (fmt, version, commit), n in sorted(counts.items())]
    return [
        Heading(2, "Provenance"),
        Paragraph(
            "What wrote the rows that count: the row format, the ragmatrix version and the benchmark "
            "repository's commit (dirty: its files differed from that commit). Rows of format 1 were "
            "written before rows recorded their provenance."
        ),
        Table(["rows", "format", "ragmatrix", "commit"], rows, numeric={0, 1}),
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


def _scale(table: FamilyTable) -> str:
    direction = "higher is better" if table.headline.higher_is_better else "lower is better"
    return f"scale {table.headline.scale}, {direction}"


def _family(table: FamilyTable, plots: Plots, descriptor: Family | None) -> list[Block]:
    digits = table.headline.digits
    blocks: list[Block] = [
        Heading(2, table.family),
        Paragraph(
            f"Headline score: {table.headline.description} ({_scale(table)}). {table.cases} cases, "
            f"{len(table.rows)} items."
        ),
    ]
    if descriptor is not None and descriptor.source is not None:
        follows = descriptor.source.line()
        blocks.append(Paragraph(f"{follows[0].upper()}{follows[1:]}."))
    if table.unranked:
        blocks.append(Paragraph(table.unranked[0].upper() + table.unranked[1:] + "."))
    header = ["rank", "model", "mean", "95% CI", "n", "items", "cases", "errors", "invalid", "vs next"]
    rows = []
    for line in table.lines:
        rank = "-" if line.rank is None else f"{line.rank}{SAME if line.same_as_above else ''}"
        model = line.label
        mean = "-" if line.mean is None else f"{line.mean:.{digits}f}"
        interval = "-" if line.low is None or line.high is None else f"[{line.low:.{digits}f}, {line.high:.{digits}f}]"
        counts = [str(line.n), str(line.items), str(line.cases), str(line.errors), str(line.invalid)]
        rows.append([rank, model, mean, interval, *counts, _versus(line.model, table.versus_next(line.model))])
    blocks.append(Table(header, rows, numeric={0, 2, 3, 4, 5, 6, 7, 8}))
    if table.family in plots.bars:
        blocks.append(Image(plots.bars[table.family], f"{table.family}: mean per model with its 95% CI"))
    blocks += _comparisons(table.comparisons, "models", "Paired tests between the models")
    if table.metrics:
        blocks.append(Heading(3, f"{table.family}: every metric per model, mean [95% CI]"))
        blocks += _metric_tables(table.metrics, with_variant=False)
    if table.metrics_by_variant:
        blocks.append(Heading(3, f"{table.family}: every metric per variant, mean [95% CI]"))
        blocks += _metric_tables(table.metrics_by_variant, with_variant=True)
        if table.family in plots.by_variant:
            blocks.append(Image(plots.by_variant[table.family], f"{table.family}: every metric per variant"))
    if table.variant_comparisons:
        blocks.append(Heading(3, f"{table.family}: variants compared within each model"))
        blocks += _comparisons(table.variant_comparisons, "variants", "Paired tests between each model's variants")
    blocks += _breakdowns(table)
    images = plots.own.get(table.family, [])
    for section in descriptor.report_sections if descriptor is not None else ():
        blocks += section(table, images)
    return blocks


def _versus(model: str, comparison: Comparison | None) -> str:
    """How `model` compares with the model ranked below it, on the cases both finished: `>`
    better, `<` worse (it may lead by mean only because it erred on the hard cases), `≈` no
    significant difference."""
    if comparison is None:
        return ""
    other = comparison.b if comparison.a == model else comparison.a
    if comparison.test is None or comparison.p_holm is None:
        return f"{comparison.note} with {other}"
    better = comparison.better
    mark = SAME if better is None else BETTER if better == model else WORSE
    return f"{mark} {other} (p {_p(comparison.p_holm, relation=True)})"


def _comparisons(comparisons: list[Comparison], what: str, title: str) -> list[Block]:
    if not comparisons:
        return []
    tested = sum(1 for c in comparisons if c.test is not None)
    first = ["model", "variant A", "variant B"] if what == "variants" else ["model A", "model B"]
    header = [*first, "paired on", "pairs", "mean A - B", "test", "p", "p (Holm)", "significant"]
    rows = []
    for c in comparisons:
        names = [c.model or "", c.a, c.b] if what == "variants" else [c.a, c.b]
        if c.test is None or c.p_holm is None:
            rows.append([*names, c.unit or "-", str(c.pairs), "-", c.note, "-", "-", "-"])
            continue
        test = c.test.test
        if c.test.test == MCNEMAR and c.test.discordant is not None:
            test += f", discordant {c.test.discordant[0]} vs {c.test.discordant[1]}"
        rows.append(
            [
                *names,
                c.unit,
                str(c.pairs),
                f"{c.test.difference:+.3f}",
                test,
                _p(c.test.p),
                _p(c.p_holm),
                "yes" if c.significant else "no",
            ]
        )
    offset = len(first)
    return [
        Paragraph(f"{title}, Holm-adjusted over the family's {tested} test(s):"),
        Table(header, rows, numeric={offset + 1, offset + 2, offset + 4, offset + 5}),
    ]


def _metric_tables(lines: list[MetricLine], with_variant: bool) -> list[Block]:
    names = sorted({name for line in lines for name in line.values})
    blocks: list[Block] = []
    for start in range(0, len(names), METRICS_PER_TABLE):
        columns = names[start : start + METRICS_PER_TABLE]
        first = ["model", "variant", "items", "cases"] if with_variant else ["model", "items", "cases"]
        rows = []
        for line in lines:
            cells = []
            for name in columns:
                value = line.values.get(name)
                if value is None:
                    cells.append("-")
                elif value.low is None or value.high is None:
                    cells.append(f"{value.mean:.3f}")
                else:
                    cells.append(f"{value.mean:.3f} [{value.low:.3f}, {value.high:.3f}]")
            first_cells = [line.model, line.variant] if with_variant else [line.model]
            rows.append([*first_cells, str(line.n), str(line.cases), *cells])
        blocks.append(Table([*first, *columns], rows, numeric=set(range(len(first) - 2, len(first) + len(columns)))))
    return blocks


def _breakdowns(table: FamilyTable) -> list[Block]:
    blocks: list[Block] = []
    digits = table.headline.digits
    for name in sorted({line.field for line in table.breakdowns}):
        header = [name, "model", "mean", "95% CI", "items", "cases"]
        rows = []
        for line in (b for b in table.breakdowns if b.field == name):
            score = line.score
            interval = (
                "-" if score.low is None or score.high is None else f"[{score.low:.{digits}f}, {score.high:.{digits}f}]"
            )
            rows.append(
                [line.value, line.model, f"{score.mean:.{digits}f}", interval, str(line.items), str(line.cases)]
            )
        blocks.append(Heading(3, f"{table.family}: {table.headline.metric} by {name}"))
        blocks.append(Table(header, rows, numeric={2, 3, 4, 5}))
    return blocks


def _p(p: float, relation: bool = False) -> str:
    """A p-value to three places; `relation` writes "= 0.031" or "< 0.001"."""
    if p < 0.001:
        return "< 0.001" if relation else "<0.001"
    return f"= {p:.3f}" if relation else f"{p:.3f}"

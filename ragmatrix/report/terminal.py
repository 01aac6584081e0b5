"""The leaderboard as plain text for the terminal summary: the same numbers as the report
(`ragmatrix.report.aggregate`), in aligned columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragmatrix.cost.figures import FamilyCosts
from ragmatrix.report.cost import terminal_columns, terminal_notes
from ragmatrix.seam.blocks import aligned
from ragmatrix.seam.family import Family
from ragmatrix.seam.tables import Comparison, FamilyTable, MetricLine, Tables

METRICS_PER_TABLE = 4
SAME = "≈"


def render(
    tables: Tables,
    families: Mapping[str, Family],
    variants: bool = False,
    costs: Mapping[str, FamilyCosts] | None = None,
) -> list[str]:
    """Every family's table (with its models' cost figures, given `costs`), its metrics per
    variant, its breakdowns, the lines its descriptor in `families` adds, and with `variants`
    the tests between each model's variants."""
    out: list[str] = []
    for table in tables.families:
        if out:
            out.append("")
        out += family_table(table, (costs or {}).get(table.family))
        out += metric_tables(table)
        out += breakdown_tables(table)
        descriptor = families.get(table.family)
        if descriptor is not None and descriptor.terminal_notes is not None:
            out += descriptor.terminal_notes(table)  # the family's own lines
        if variants:
            out += variant_tests(table)
    return out


def _ci(low: float | None, high: float | None, digits: int) -> str:
    return "-" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def heading(table: FamilyTable) -> str:
    direction = "higher is better" if table.headline.higher_is_better else "lower is better"
    cases = table.cases
    return (
        f"{table.family}: {table.headline.metric}, scale {table.headline.scale}, {direction} "
        f"({cases} case{'s' * (cases != 1)}, {len(table.rows)} items)"
    )


def family_table(table: FamilyTable, costs: FamilyCosts | None = None) -> list[str]:
    digits = table.headline.digits
    cost_header, cost_cells = terminal_columns(costs, [line.model for line in table.lines])
    header = ("rank", "model", "mean", "95% CI", "n", "items", "cases", "errors", "invalid", *cost_header)
    rows: list[tuple[str, ...]] = [header]
    for line in table.lines:
        rank = "-" if line.rank is None else f"{line.rank}{SAME if line.same_as_above else ''}"
        mean = "-" if line.mean is None else f"{line.mean:.{digits}f}"
        counts = (str(line.n), str(line.items), str(line.cases), str(line.errors), str(line.invalid))
        rows.append((rank, line.label, mean, _ci(line.low, line.high, digits), *counts, *cost_cells[line.model]))
    unranked = [table.unranked] if table.unranked else []
    numeric = {0, 2, 4, 5, 6, 7, 8} | {9 + i for i, name in enumerate(cost_header) if name != "device"}
    return [heading(table), *unranked, *aligned(rows, numeric=numeric), *terminal_notes(costs)]


def metric_tables(table: FamilyTable) -> list[str]:
    lines = table.metrics_by_variant or table.metrics
    names = sorted({name for line in lines for name in line.values})
    if not names:
        return []
    chunks = [names[start : start + METRICS_PER_TABLE] for start in range(0, len(names), METRICS_PER_TABLE)]
    out: list[str] = []
    for index, columns in enumerate(chunks, start=1):
        part = f", part {index} of {len(chunks)}" if len(chunks) > 1 else ""
        per = "per variant" if table.metrics_by_variant else "per model"
        out += ["", f"{table.family}: every metric {per}, mean [95% CI]{part}"]
        out += aligned(_metric_rows(lines, columns), numeric=set(range(2, 3 + len(columns))))
    return out


def _metric_rows(lines: Sequence[MetricLine], columns: list[str]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [("model", "variant", "items", *columns)]
    for line in lines:
        cells = []
        for name in columns:
            value = line.values.get(name)
            cells.append("-" if value is None else f"{value.mean:.3f} {_ci(value.low, value.high, 3)}")
        rows.append((line.model, line.variant, str(line.n), *cells))
    return rows


def breakdown_tables(table: FamilyTable) -> list[str]:
    out: list[str] = []
    digits = table.headline.digits
    for name in sorted({line.field for line in table.breakdowns}):
        rows: list[tuple[str, ...]] = [(name, "model", "mean", "95% CI", "items", "cases")]
        for line in (b for b in table.breakdowns if b.field == name):
            score = line.score
            rows.append(
                (
                    line.value,
                    line.model,
                    f"{score.mean:.{digits}f}",
                    _ci(score.low, score.high, digits),
                    str(line.items),
                    str(line.cases),
                )
            )
        out += ["", f"{table.family}: {table.headline.metric} by {name}"]
        out += aligned(rows, numeric={2, 4, 5})
    return out


def variant_tests(table: FamilyTable) -> list[str]:
    if not table.variant_comparisons:
        return []
    rows: list[tuple[str, ...]] = [("model", "variant A", "variant B", "cases", "mean A - B", "p (Holm)", "")]
    for c in table.variant_comparisons:
        rows.append((c.model or "", c.a, c.b, str(c.pairs), *_test_cells(c)))
    return [
        "",
        f"{table.family}: variants compared within each model (paired on cases, Holm)",
        *aligned(rows, {3, 4, 5}),
    ]


def _test_cells(c: Comparison) -> tuple[str, str, str]:
    if c.test is None or c.p_holm is None:
        return ("-", "-", c.note)
    p = "<0.001" if c.p_holm < 0.001 else f"{c.p_holm:.3f}"
    return (f"{c.test.difference:+.3f}", p, "significant" if c.significant else "")

"""The report's numbers: per family, the ranked leaderboard lines, every metric, and the paired
significance tests between models; across families, the overview.

The lines and metrics come from `plugin.leaderboard`, the same functions the terminal summary
uses, so the two always agree.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from plugin.leaderboard import (
    LeftOut,
    Line,
    MetricLine,
    item_score,
    select,
    summarise,
    summarise_metrics,
)
from plugin.stats.significance import ALPHA, PairedTest, holm, paired_test

Row = dict[str, Any]

# What each family's headline score is; a family not listed here reads "mean score".
HEADLINES = {
    "rag_interpretation": "accuracy: the share of items judged or answered right",
    "rss_probes": "mean RSS (x500) over every sample of every length",
    "code_retrieval": "file-level nDCG@10",
    "zelo_battles": "nDCG@k of the zELO ranking against the graded labels",
}

RANK_RULE = (
    "Models are sorted by their mean rank over the families they ran (1 = the best mean in that "
    "family; equal means share a rank), then by the number of families they ran, then by name. "
    "Ranks are compared across families because scores are not: each family has its own scale."
)


@dataclass(frozen=True)
class Comparison:
    """A paired test of two models of one family; `a` is ranked above `b`."""

    family: str
    a: str
    b: str
    unit: str  # "items" (the same items), "cases" (means over each model's variants of a case) or ""
    test: PairedTest | None  # None: the two models share no item or case
    p_holm: float | None = None

    @property
    def significant(self) -> bool:
        return self.p_holm is not None and self.p_holm < ALPHA


@dataclass
class FamilyTable:
    family: str
    headline: str
    lines: list[Line]  # best first; a model without any score last
    ranks: dict[str, int]  # model -> rank (models with a score only)
    metrics: list[MetricLine]  # every metric per model, its variants pooled
    metrics_by_variant: list[MetricLine]  # per model and variant, when some model has several
    comparisons: list[Comparison]
    rows: list[Row]  # the rows that count

    def versus_next(self, model: str) -> Comparison | None:
        """The test of `model` against the model ranked just below it."""
        order = [line.model for line in self.lines if line.mean is not None]
        if model not in order or order.index(model) + 1 >= len(order):
            return None
        below = order[order.index(model) + 1]
        return next((c for c in self.comparisons if c.a == model and c.b == below), None)


@dataclass
class OverviewLine:
    model: str
    cells: dict[str, Line]  # family -> the model's line
    ranks: dict[str, int]  # family -> rank
    mean_rank: float | None


@dataclass
class Tables:
    families: list[FamilyTable] = field(default_factory=list)
    overview: list[OverviewLine] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable lines in the result files
    newest: str | None = None  # the newest `recorded_at` among the rows that count

    def family(self, name: str) -> FamilyTable | None:
        return next((table for table in self.families if table.family == name), None)


def load(results_dir: Path) -> tuple[dict[str, list[Row]], list[str]]:
    """Every family's rows in a results folder, and the problems found reading them."""
    from plugin.store import ResultStore

    loaded = ResultStore(results_dir).load_all()
    problems = [problem for family in loaded.values() for problem in family.problems]
    return {family: data.rows for family, data in loaded.items() if data.rows}, problems


def gather(rows_by_family: dict[str, list[Row]], problems: list[str] | None = None) -> Tables:
    selection = select(rows_by_family)
    lines, _ = summarise(rows_by_family)
    pooled = summarise_metrics(rows_by_family, by_variant=False)
    by_variant = summarise_metrics(rows_by_family)
    tables = Tables(left_out=selection.left_out, problems=list(problems or []))
    for family, rows in selection.rows.items():
        family_lines = [line for line in lines if line.family == family]
        variants = [m for m in by_variant if m.family == family]
        several = len({m.variant for m in variants}) > 1
        table = FamilyTable(
            family=family,
            headline=HEADLINES.get(family, "mean score"),
            lines=family_lines,
            ranks=ranks(family_lines),
            metrics=[m for m in pooled if m.family == family],
            metrics_by_variant=variants if several else [],
            comparisons=compare_models(family, family_lines, rows),
            rows=rows,
        )
        tables.families.append(table)
    tables.overview = overview(tables.families)
    recorded = [str(r["recorded_at"]) for rows in selection.rows.values() for r in rows if r.get("recorded_at")]
    tables.newest = max(recorded) if recorded else None
    return tables


def ranks(lines: list[Line]) -> dict[str, int]:
    """Competition ranks by mean, best first: equal means share a rank (1, 1, 3)."""
    scored = sorted((line for line in lines if line.mean is not None), key=lambda line: -(line.mean or 0.0))
    out: dict[str, int] = {}
    for index, line in enumerate(scored):
        if index and line.mean == scored[index - 1].mean:
            out[line.model] = out[scored[index - 1].model]
        else:
            out[line.model] = index + 1
    return out


def overview(families: list[FamilyTable]) -> list[OverviewLine]:
    """Model x family, sorted by the rule in RANK_RULE."""
    models = sorted({line.model for table in families for line in table.lines})
    out = []
    for model in models:
        cells = {t.family: line for t in families for line in t.lines if line.model == model}
        model_ranks = {t.family: t.ranks[model] for t in families if model in t.ranks}
        mean_rank = sum(model_ranks.values()) / len(model_ranks) if model_ranks else None
        out.append(OverviewLine(model, cells, model_ranks, mean_rank))
    out.sort(key=lambda o: (o.mean_rank is None, o.mean_rank or 0.0, -len(o.cells), o.model))
    return out


# --- paired significance -----------------------------------------------------------------------


def compare_models(family: str, lines: list[Line], rows: list[Row]) -> list[Comparison]:
    """Every pair of models with a score, the better mean first, tested on the items both
    finished; Holm's correction over the family's tests.

    Two models pair on the items both ran (same test and item). A model that reads no prompt
    runs a case once where an LLM runs each prompt variant, so two such models may share no
    item: they then pair on the cases both ran, each model's score of a case being its mean
    over the case's items."""
    items: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    cases: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        score = item_score(row)
        if score is None:
            continue
        model = str(row.get("model"))
        items[model][(str(row.get("test", "")), str(row.get("item", "")))] = score
        cases[model][_case_of(row)].append(score)
    order = [line.model for line in lines if line.mean is not None]
    comparisons: list[Comparison] = []
    for a, b in combinations(order, 2):
        shared = sorted(set(items[a]) & set(items[b]))
        if shared:
            unit = "items"
            x, y = [items[a][k] for k in shared], [items[b][k] for k in shared]
        else:
            common = sorted(set(cases[a]) & set(cases[b]))
            unit = "cases" if common else ""
            x = [sum(cases[a][c]) / len(cases[a][c]) for c in common]
            y = [sum(cases[b][c]) / len(cases[b][c]) for c in common]
        comparisons.append(Comparison(family, a, b, unit, paired_test(x, y) if x else None))
    tested = [c for c in comparisons if c.test is not None]
    adjusted = iter(holm([c.test.p for c in tested if c.test is not None]))
    return [
        Comparison(c.family, c.a, c.b, c.unit, c.test, next(adjusted) if c.test is not None else None)
        for c in comparisons
    ]


def _case_of(row: Row) -> str:
    case = row.get("case")
    return str(case) if case else str(row.get("item", "")).split(":")[0]

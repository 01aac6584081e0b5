"""The leaderboard's numbers as data: what `ragmatrix.report.aggregate` computes once, and what
the terminal, the report and a family's own report part read.

Only data and the small facts read off it live here (a line's label, a table's ranks), so that
a family's report part and the report both stand on this module without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ragmatrix.results.rows import Row
from ragmatrix.seam.headline import Headline
from ragmatrix.stats.intervals import Interval
from ragmatrix.stats.significance import ALPHA, PairedTest

TOO_FEW = "too few shared cases"
INCOMPLETE = "†"  # the model has error items: its mean covers only the items it finished


@dataclass(frozen=True)
class LeftOut:
    """Rows of one model in one family that no mean includes, and why."""

    family: str
    model: str
    rows: int
    reason: str

    def note(self) -> str:
        return f"{self.family}: {self.rows} row(s) of {self.model} left out: {self.reason}"


@dataclass
class Line:
    """One model in one family."""

    model: str
    family: str
    mean: float | None
    low: float | None
    high: float | None
    method: str  # how the interval was computed (ragmatrix.stats.intervals)
    n: int  # scored iterations
    items: int
    cases: int  # cases with a score
    errors: int  # items that ended in an error
    invalid: int  # invalid answers among the scored iterations
    attempted: int = 0  # cases the model has a row for, an error included
    expected_cases: int = 0  # the cases the model's tests hold in this family
    attempted_variants: int = 0  # variants (chunkings, wordings, modes) the model has a row for
    expected_variants: int = 0  # the variants the model's tests hold in this family
    rank: int | None = None
    same_as_above: bool = False  # shares its rank with the model listed above

    @property
    def partial(self) -> bool:
        """Ran fewer of its tests' cases, or of their variants, than other models did: its mean
        rests on other items. An error still counts as run: errors are counted and marked apart."""
        short = self.attempted < self.expected_cases or self.attempted_variants < self.expected_variants
        return self.mean is not None and short

    @property
    def coverage(self) -> str:
        if not self.partial:
            return ""
        parts = []
        if self.attempted < self.expected_cases:
            parts.append(f"{self.attempted} of {self.expected_cases} cases")
        if self.attempted_variants < self.expected_variants:
            parts.append(f"{self.attempted_variants} of {self.expected_variants} variants")
        return f"partial ({', '.join(parts)})"

    @property
    def label(self) -> str:
        """The model's name with its marks, as the terminal and the report both show it."""
        return " ".join(part for part in (self.model, INCOMPLETE if self.errors else "", self.coverage) if part)


@dataclass
class MetricLine:
    model: str
    family: str
    variant: str  # "all" when pooled
    n: int  # items with metrics
    cases: int
    values: dict[str, Interval]


@dataclass
class BreakdownLine:
    family: str
    field: str  # "query_type"
    value: str  # "Code"
    model: str
    items: int
    cases: int
    score: Interval


@dataclass(frozen=True)
class Comparison:
    """A paired test of `a` against `b`: two models (the higher mean first), or two variants of
    one `model`.

    The test is two-sided and pairs on what both finished, so the model with the higher mean
    over its own items may be the worse one on the shared cases (it erred on the hard ones):
    `better` says which way a significant difference goes."""

    family: str
    a: str
    b: str
    unit: str  # "items" or "cases" (per-case means); "" when nothing is shared
    pairs: int
    test: PairedTest | None  # None: nothing shared, or too few shared cases
    p_holm: float | None = None
    model: str | None = None  # set for a comparison of variants
    higher_is_better: bool = True  # the family's headline direction: which sign of a - b favours a

    @property
    def significant(self) -> bool:
        return self.p_holm is not None and self.p_holm < ALPHA

    @property
    def better(self) -> str | None:
        """`a` or `b`: the one significantly better on the shared pairs; None when the
        difference is not significant."""
        if not self.significant or self.test is None or self.test.difference == 0:
            return None
        return self.a if (self.test.difference > 0) == self.higher_is_better else self.b

    @property
    def note(self) -> str:
        if self.test is not None:
            return ""
        return TOO_FEW if self.pairs else "nothing shared"


def find(comparisons: Iterable[Comparison], a: str, b: str) -> Comparison | None:
    return next((c for c in comparisons if {c.a, c.b} == {a, b}), None)


@dataclass
class FamilyTable:
    """One family's part of the leaderboard: what its own report part, terminal notes and
    plots are given."""

    family: str
    headline: Headline
    lines: list[Line]  # in rank order; a model without any score last
    metrics: list[MetricLine]  # every metric per model, its variants pooled
    metrics_by_variant: list[MetricLine]  # per model and variant, when some model has several
    comparisons: list[Comparison]
    variant_comparisons: list[Comparison]
    breakdowns: list[BreakdownLine]
    rows: list[Row]  # the rows that count
    unranked: str = ""  # why the table has no ranks; empty when it has them

    @property
    def ranks(self) -> dict[str, int]:
        return {line.model: line.rank for line in self.lines if line.rank is not None}

    @property
    def cases(self) -> int:
        return len({row.case for row in self.rows})

    def versus_next(self, model: str) -> Comparison | None:
        """The test of `model` against the model ranked just below it."""
        order = [line.model for line in self.lines if line.mean is not None]
        if model not in order or order.index(model) + 1 >= len(order):
            return None
        below = order[order.index(model) + 1]
        return find(self.comparisons, model, below)


@dataclass
class OverviewLine:
    model: str
    cells: dict[str, Line]  # family -> the model's line
    ranks: dict[str, int]  # family -> rank
    mean_rank: float | None
    mean_place: float | None = None  # the mean of its places in the families' tables, by score


@dataclass
class Tables:
    families: list[FamilyTable] = field(default_factory=list)
    overview: list[OverviewLine] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable lines in the result files
    newest: str | None = None  # the newest `recorded_at` among the rows that count

    def family(self, name: str) -> FamilyTable | None:
        return next((table for table in self.families if table.family == name), None)

"""The leaderboard's numbers, computed once: the terminal summary and the report both render
what `aggregate` returns (the data classes of `ragmatrix.seam.tables`), so they always agree.

Per family:
- `select` keeps the rows that may share a mean (the newest scoring version; of a model's
  rows, those run with its usual number of iterations) and says what it left out;
- a `Line` per model: mean, 95% interval (`ragmatrix.stats.intervals`), counts, coverage;
- paired tests between models (`compare_models`) and between each model's variants
  (`compare_variants`), cluster-aware: when a case gives several items, they pair on
  per-case means; Holm's correction within the family;
- ranks that never over-claim and never go back down the list: a model with partial coverage
  (fewer cases or variants) is placed after the models with full coverage; a model shares the
  rank of the models above it unless one of them is significantly better on the cases both
  finished (a difference the other way, from a model above that erred on the hard cases, never
  separates); a table whose cases are too few for any difference to be significant has no
  ranks, and says why;
- every metric the iterations report, pooled and per variant, and the family's breakdowns,
  each with the same kind of interval as the headline.

Pure: the only state is an optional `Memo` of intervals and tests, which the caller saves.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from ragmatrix.foundations.untrusted import safe_line
from ragmatrix.report.memo import Memo
from ragmatrix.results.rows import Row
from ragmatrix.seam.family import Family
from ragmatrix.seam.tables import (
    BreakdownLine,
    Comparison,
    FamilyTable,
    Headline,
    LeftOut,
    Line,
    MetricLine,
    OverviewLine,
    Tables,
    find,
)
from ragmatrix.stats.intervals import Interval, interval
from ragmatrix.stats.significance import ALPHA, PairedTest, fewest_pairs, holm, paired_test, smallest_p

# Fewer shared cases than this and no paired test is run: "too few shared cases".
MIN_SHARED_CASES = 2
# The headline of rows whose family is not among the descriptors given.
GENERIC_HEADLINE = Headline("mean score", "the mean of the items' scores")


# --- selection ---------------------------------------------------------------------------------


@dataclass
class Selection:
    rows: dict[str, list[Row]] = field(default_factory=dict)  # family -> the rows that count
    left_out: list[LeftOut] = field(default_factory=list)


def _version_order(version: Any) -> tuple[int, Any]:
    return (0, version) if isinstance(version, int | float) else (1, str(version))


def select(rows_by_family: dict[str, list[Row]], keep: Callable[[Row], bool] | None = None) -> Selection:
    """The rows that may share a mean, and what was left out.

    - Scoring version: only rows of the family's newest version count; older rows were scored
      by other rules (they rerun on the next `pytest benchmark`).
    - Iterations: of a model's finished rows in a family, only those run with its most common
      number of iterations per item count (on a tie, the larger number). Error rows hold no
      score and are kept, so that errors are always counted.
    """
    selection = Selection()
    for family, rows in sorted(rows_by_family.items()):
        rows = [r for r in rows if keep is None or keep(r)]
        if not rows:
            continue
        newest = max((r.scoring_version for r in rows), key=_version_order)
        kept: list[Row] = []
        for model, model_rows in sorted(_by(rows, lambda r: r.model).items()):
            old = [r for r in model_rows if r.scoring_version != newest]
            if old:
                versions = ", ".join(sorted({str(r.scoring_version) for r in old}))
                reason = f"scoring version {versions} is older than {newest} (rerun them)"
                selection.left_out.append(LeftOut(family, model, len(old), reason))
            current = [r for r in model_rows if r.scoring_version == newest]
            counts = Counter(r.iteration_count for r in current if r.ok)
            if counts:
                chosen = max(counts, key=lambda n: (counts[n], n))
                mixed = [r for r in current if r.ok and r.iteration_count != chosen]
                if mixed:
                    others = ", ".join(str(n) for n in sorted({r.iteration_count for r in mixed}))
                    reason = f"run with {others} iteration(s) per item, not {chosen} like the rest"
                    selection.left_out.append(LeftOut(family, model, len(mixed), reason))
                    current = [r for r in current if not (r.ok and r.iteration_count != chosen)]
            kept.extend(current)
        if kept:
            selection.rows[family] = kept
    return selection


RANK_RULE = (
    "Models are sorted by their mean rank over the families they ran (1 = the best in that family); "
    "a tie is broken by score: by the mean of their places in the families' tables, which list "
    "models by mean; then by the number of families they ran. Ranks and places are compared "
    "across families because scores are not: each family has its own scale."
)


def aggregate(
    rows_by_family: dict[str, list[Row]],
    families: Mapping[str, Family],
    problems: Iterable[str] = (),
    memo: Memo | None = None,
    variants: bool = True,
) -> Tables:
    """Everything the terminal and the report show. `families` are the descriptors the rows
    are read with (headline, yes/no metrics, breakdowns); a family not among them gets a
    generic headline, its yes/no scores judged by their values. `variants=False` skips the
    tests between each model's variants (the terminal asks for them only on request)."""
    memo = memo or Memo(None)
    selection = select(rows_by_family)
    tables = Tables(left_out=selection.left_out, problems=list(problems))
    for family, rows in selection.rows.items():
        tables.families.append(_family_table(family, families.get(family), rows, memo, variants))
    tables.overview = overview(tables.families)
    recorded = [row.recorded_at for rows in selection.rows.values() for row in rows if row.recorded_at]
    tables.newest = max(recorded) if recorded else None
    return tables


def _family_table(family: str, descriptor: Family | None, rows: list[Row], memo: Memo, variants: bool) -> FamilyTable:
    headline = descriptor.headline if descriptor is not None else GENERIC_HEADLINE
    # the cases some model has a score for: a case that only ever errored is nobody's shortfall
    expected = {
        test: {row.case for row in test_rows if row.ok} for test, test_rows in _by(rows, lambda r: r.test).items()
    }
    # likewise the variants (chunkings, wordings, modes) of each test that some model has a score for
    scored_variants = {(row.test, row.variant) for row in rows if row.ok and row.variant}
    lines = []
    for model, model_rows in _by(rows, lambda r: r.model).items():
        # a known family says whether its scores are yes/no; an unknown one is judged by its values
        line = _line(model, family, model_rows, memo, headline.binary if descriptor is not None else None)
        tests = {r.test for r in model_rows}
        line.expected_cases = len(set().union(*(expected[test] for test in tests)))
        line.attempted = len({row.case for row in model_rows} & set().union(*expected.values()))
        own_variants = {(test, variant) for test, variant in scored_variants if test in tests}
        line.expected_variants = len(own_variants)
        line.attempted_variants = len({(row.test, row.variant) for row in model_rows} & own_variants)
        lines.append(line)
    comparisons = compare_models(family, lines, rows, memo, headline.higher_is_better)
    unranked = rank(lines, comparisons, headline.higher_is_better)
    by_variant = metric_lines(family, rows, memo, by_variant=True, descriptor=descriptor)
    several = len({m.variant for m in by_variant}) > 1
    return FamilyTable(
        family=family,
        headline=headline,
        lines=lines,
        metrics=metric_lines(family, rows, memo, by_variant=False, descriptor=descriptor),
        metrics_by_variant=by_variant if several else [],
        comparisons=comparisons,
        variant_comparisons=compare_variants(family, rows, memo, headline.higher_is_better) if variants else [],
        breakdowns=breakdown_lines(
            family, rows, descriptor.breakdowns if descriptor else (), memo, headline.binary if descriptor else None
        ),
        rows=rows,
        unranked=unranked,
    )


def _by(rows: Iterable[Row], key: Callable[[Row], str]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return dict(groups)


def remembered_interval(groups: Sequence[Sequence[float]], memo: Memo, binary: bool | None = None) -> Interval:
    ordered = sorted(sorted(group) for group in groups if group)
    return memo.remember(
        {"interval": ordered, "binary": binary}, lambda: interval(ordered, binary), Interval.to_json, Interval.from_json
    )


def _line(model: str, family: str, rows: list[Row], memo: Memo, binary: bool | None) -> Line:
    by_case: dict[str, list[float]] = defaultdict(list)
    invalid = errors = 0
    for row in rows:
        if not row.ok:
            errors += 1
            continue
        for entry in row.scored_iterations():
            by_case[row.case].append(float(entry.score or 0.0))
            invalid += entry.invalid_answers  # a zELO judge's invalid judgements each count
    n = sum(len(values) for values in by_case.values())
    if not n:
        return Line(model, family, None, None, None, "none", 0, len(rows), 0, errors, invalid)
    result = remembered_interval(list(by_case.values()), memo, binary)
    return Line(
        model, family, result.mean, result.low, result.high, result.method, n, len(rows), len(by_case), errors, invalid
    )


def rank(lines: list[Line], comparisons: list[Comparison], higher_is_better: bool = True) -> str:
    """Sort `lines` in place and give each its rank; return why there are no ranks ("" when
    there are).

    Full coverage before partial, then by mean (best first); a model without a score last.
    Down the list, a model shares the rank of the models above it (`same_as_above`) unless one
    of those is significantly better than it on the shared cases (Holm-adjusted) or has full
    coverage where it has not; then its rank is its place in the list. So the ranks never go
    back down, no model shares the rank of one significantly better, and a new rank always rests
    on a model above that is significantly better (or on coverage). When no pair of models
    shares enough cases for any difference to be significant, no model is ranked.
    """
    sign = -1.0 if higher_is_better else 1.0
    lines.sort(key=lambda line: (line.mean is None, line.partial, sign * (line.mean or 0.0), line.model))
    scored = [line for line in lines if line.mean is not None]
    unranked = too_few_to_rank(scored, comparisons)
    if unranked:
        return unranked
    sharing: list[Line] = []  # the models that hold the last rank given
    for place, line in enumerate(scored, start=1):
        if sharing and not any(_separated(above, line, comparisons) for above in sharing):
            line.rank, line.same_as_above = sharing[0].rank, True
            sharing.append(line)
        else:
            line.rank, line.same_as_above = place, False
            sharing = [line]
    return ""


def _separated(above: Line, line: Line, comparisons: list[Comparison]) -> bool:
    """Whether `line` must not share the rank of `above`: partial coverage never ranks level
    with full coverage, nor a model with one that is significantly better than it."""
    test = find(comparisons, above.model, line.model)
    return above.partial != line.partial or (test is not None and test.better == above.model)


def too_few_to_rank(scored: list[Line], comparisons: list[Comparison]) -> str:
    """Why no difference in this table can be significant, whatever the scores: every pair of
    models shares too few cases for a p-value below ALPHA after Holm's correction. "" when
    some pair can be told apart, or when there is at most one model."""
    if len(scored) < 2:
        return ""
    tests = sum(1 for c in comparisons if c.test is not None)
    most = max((c.pairs for c in comparisons), default=0)
    if tests and tests * smallest_p(max(c.pairs for c in comparisons if c.test is not None)) < ALPHA:
        return ""
    over = f", Holm-adjusted over {tests} tests" if tests > 1 else ""
    return (
        f"not ranked: too few cases to tell any two models apart (two models share at most {most}; "
        f"a difference needs at least {fewest_pairs(tests)} to be significant{over})"
    )


# --- paired tests ------------------------------------------------------------------------------


def _pairs(
    items_a: dict[tuple[str, str], float], items_b: dict[tuple[str, str], float]
) -> tuple[str, list[float], list[float]]:
    """The paired values of two score maps keyed by (case, item), cluster-aware: one pair per
    shared item when no case gives more than one, else one pair per case (the mean of its
    shared items). Two models that share no item (an LLM's prompt variants against an
    embedder's one item per case) pair on their per-case means over the cases both ran."""
    shared = sorted(set(items_a) & set(items_b))
    if shared:
        per_case = Counter(case for case, _ in shared)
        if max(per_case.values()) == 1:
            return "items", [items_a[k] for k in shared], [items_b[k] for k in shared]
        keys_by_case: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for key in shared:
            keys_by_case[key[0]].append(key)
    else:
        keys_by_case = defaultdict(list)
        cases_a = {case for case, _ in items_a}
        for key in items_b:
            if key[0] in cases_a:
                keys_by_case[key[0]].append(key)
        for key in items_a:
            if key[0] in keys_by_case:
                keys_by_case[key[0]].append(key)
    x, y = [], []
    for case in sorted(keys_by_case):
        keys = keys_by_case[case]
        values_a = [items_a[k] for k in keys if k in items_a]
        values_b = [items_b[k] for k in keys if k in items_b]
        if values_a and values_b:
            x.append(sum(values_a) / len(values_a))
            y.append(sum(values_b) / len(values_b))
    return "cases", x, y


def remembered_test(x: list[float], y: list[float], memo: Memo) -> PairedTest:
    def dump(test: PairedTest) -> list[Any]:
        return [test.test, test.n, test.difference, test.p, list(test.discordant) if test.discordant else None]

    def load(value: list[Any]) -> PairedTest:
        name, n, difference, p, discordant = value
        return PairedTest(str(name), int(n), float(difference), float(p), tuple(discordant) if discordant else None)

    return memo.remember({"paired": [x, y]}, lambda: paired_test(x, y), dump, load)


def _tested(
    family: str,
    a: str,
    b: str,
    unit: str,
    x: list[float],
    y: list[float],
    memo: Memo,
    model: str | None = None,
    higher_is_better: bool = True,
) -> Comparison:
    if len(x) < MIN_SHARED_CASES:
        return Comparison(family, a, b, unit if x else "", len(x), None, model=model, higher_is_better=higher_is_better)
    test = remembered_test(x, y, memo)
    return Comparison(family, a, b, unit, len(x), test, model=model, higher_is_better=higher_is_better)


def _with_holm(comparisons: list[Comparison]) -> list[Comparison]:
    tested = [c for c in comparisons if c.test is not None]
    adjusted = iter(holm([c.test.p for c in tested if c.test is not None]))
    return [replace(c, p_holm=next(adjusted) if c.test else None) for c in comparisons]


def _score_map(rows: Iterable[Row]) -> dict[tuple[str, str], float]:
    scores: dict[tuple[str, str], float] = {}
    for row in rows:
        score = row.item_score()
        if score is not None:
            scores[(row.case, f"{row.test}::{row.item}")] = score
    return scores


def compare_models(
    family: str, lines: list[Line], rows: list[Row], memo: Memo, higher_is_better: bool = True
) -> list[Comparison]:
    """Every pair of models with a score, the better mean first; Holm over the family's tests."""
    scores = {model: _score_map(model_rows) for model, model_rows in _by(rows, lambda r: r.model).items()}
    sign = -1.0 if higher_is_better else 1.0
    by_mean = sorted(lines, key=lambda line: sign * (line.mean or 0.0))
    order = [line.model for line in by_mean if line.mean is not None]
    comparisons = []
    for a, b in combinations(order, 2):
        unit, x, y = _pairs(scores[a], scores[b])
        comparisons.append(_tested(family, a, b, unit, x, y, memo, higher_is_better=higher_is_better))
    return _with_holm(comparisons)


def compare_variants(family: str, rows: list[Row], memo: Memo, higher_is_better: bool = True) -> list[Comparison]:
    """For each model with several variants (chunkings, prompt wordings, modes), every pair of
    its variants, paired on the cases both ran; Holm over all of the family's variant tests."""
    comparisons = []
    for model, model_rows in sorted(_by(rows, lambda r: r.model).items()):
        by_variant = _by((r for r in model_rows if r.variant), lambda r: f"{r.test}::{r.variant}")
        if len(by_variant) < 2:
            continue
        per_case = {
            variant: {row.case: score for row in variant_rows if (score := row.item_score()) is not None}
            for variant, variant_rows in by_variant.items()
        }
        for a, b in combinations(sorted(per_case), 2):
            if a.split("::")[0] != b.split("::")[0]:
                continue  # variants of different tests are different questions
            shared = sorted(set(per_case[a]) & set(per_case[b]))
            x, y = [per_case[a][c] for c in shared], [per_case[b][c] for c in shared]
            a_name, b_name = a.split("::")[1], b.split("::")[1]
            comparisons.append(_tested(family, a_name, b_name, "cases", x, y, memo, model, higher_is_better))
    return _with_holm(comparisons)


# --- metrics and breakdowns ----------------------------------------------------------------------


def metric_lines(
    family: str, rows: list[Row], memo: Memo, by_variant: bool = True, descriptor: Family | None = None
) -> list[MetricLine]:
    """Mean and interval of every metric the iterations carry, per model (and variant), over the
    items that ended without error, grouped by case like the headline. A known family says
    which of its metrics are yes/no; an unknown family's are judged by their values."""

    def binary(name: str) -> bool | None:
        if descriptor is None:
            return None
        if name == descriptor.headline.metric:
            return descriptor.headline.binary
        return name in descriptor.binary_metrics

    groups: dict[tuple[str, str], dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    items: Counter[tuple[str, str]] = Counter()
    cases: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        if not row.ok:
            continue
        values = row.item_metrics()
        if not values:
            continue
        group = (row.model, (row.variant or "-") if by_variant else "all")
        items[group] += 1
        cases[group].add(row.case)
        for name, value in values.items():
            groups[group][name][row.case].append(value)
    lines = []
    for (model, variant), metrics in sorted(groups.items()):
        intervals = {
            name: remembered_interval(list(by_case.values()), memo, binary(name))
            for name, by_case in sorted(metrics.items())
        }
        lines.append(
            MetricLine(model, family, variant, items[(model, variant)], len(cases[(model, variant)]), intervals)
        )
    return lines


def breakdown_values(row: Row, name: str) -> list[str]:
    """The values a row holds for a breakdown field: on the row itself, else in its first
    iteration's details. A list (tags) gives each of its values: a row counts under each tag."""
    extra = row.model_extra or {}
    found: Any = extra.get(name)
    if found is None:
        for entry in row.iterations[:1]:
            found = entry.details.get(name)
    if found is None:
        return []
    # read from a results file, shown in a table: one line, whatever the data file held
    return [safe_line(str(value)) for value in found] if isinstance(found, list) else [safe_line(str(found))]


def breakdown_lines(
    family: str, rows: list[Row], fields: Sequence[str], memo: Memo, binary: bool | None = None
) -> list[BreakdownLine]:
    lines = []
    for name in fields:
        groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        items: Counter[tuple[str, str]] = Counter()
        for row in rows:
            for value in breakdown_values(row, name):
                items[(value, row.model)] += 1
                for entry in row.scored_iterations():
                    groups[(value, row.model)][row.case].append(float(entry.score or 0.0))
        for (value, model), by_case in sorted(groups.items()):
            score = remembered_interval(list(by_case.values()), memo, binary)
            lines.append(BreakdownLine(family, name, value, model, items[(value, model)], len(by_case), score))
    return lines


# --- across families ---------------------------------------------------------------------------


def overview(families: list[FamilyTable]) -> list[OverviewLine]:
    """Model x family, sorted by the rule in RANK_RULE."""
    models = sorted({line.model for table in families for line in table.lines})
    # a model's place in a family: its position in the table, which lists models by mean
    places = {
        (t.family, line.model): place
        for t in families
        for place, line in enumerate((line for line in t.lines if line.mean is not None), start=1)
    }
    out = []
    for model in models:
        cells = {t.family: line for t in families for line in t.lines if line.model == model}
        model_ranks = {t.family: t.ranks[model] for t in families if model in t.ranks}
        mean_rank = sum(model_ranks.values()) / len(model_ranks) if model_ranks else None
        model_places = [places[(family, model)] for family in cells if (family, model) in places]
        mean_place = sum(model_places) / len(model_places) if model_places else None
        out.append(OverviewLine(model, cells, model_ranks, mean_rank, mean_place))
    out.sort(
        key=lambda o: (
            o.mean_rank is None,
            o.mean_rank or 0.0,
            o.mean_place is None,
            o.mean_place or 0.0,
            -len(o.cells),
            o.model,  # only when everything else is equal
        )
    )
    return out

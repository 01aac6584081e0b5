"""The leaderboard report: paired tests and Holm's correction on data with known answers, the
selection of stale and mixed rows, pairing, the markdown and HTML outputs, --compare, the
checksum, and the page in headless Chromium."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import shutil
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from project import models_yaml, write

import ragmatrix.stats
from ragmatrix.cli import main
from ragmatrix.families import all_families
from ragmatrix.report import write_report
from ragmatrix.report.aggregate import aggregate, select
from ragmatrix.report.aggregate import rank as assign_ranks
from ragmatrix.results import checksum
from ragmatrix.results.rows import Row
from ragmatrix.seam.tables import Comparison, Line, find
from ragmatrix.stats import code_version
from ragmatrix.stats.significance import (
    MCNEMAR,
    PERMUTATION,
    PairedTest,
    holm,
    mcnemar_exact,
    paired_permutation,
    paired_test,
)
from ragmatrix.testing.openai_server import Reply


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    # the memoised intervals go to a private folder, not the project's .benchmark_cache
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def row(family: str, model: str, item: str, scores: list[float | None], **extra: Any) -> dict[str, Any]:
    """A result row as `ragmatrix.plugin.runner.build_row` writes it; a None score is an error iteration."""
    details = extra.pop("details", {})
    version = extra.pop("scoring_version", 1)
    entries: list[dict[str, Any]] = []
    for score in scores:
        entries.append({"error": "HTTP 500"} if score is None else {"score": score, "valid": True, **details})
    ok = all("error" not in e for e in entries)
    scored = [e["score"] for e in entries if "score" in e]
    return {
        "family": family,
        "test": extra.pop("test", f"test_{family}"),
        "model": model,
        "case": extra.pop("case", item.split(":")[0]),
        "variant": extra.pop("variant", item.split(":")[1] if ":" in item else ""),
        "item": item,
        "key": f"{family}-{model}-{item}-{version}-{len(entries)}",
        "scoring_version": version,
        "status": "ok" if ok else "error",
        "score": sum(scored) / len(scored) if ok else None,
        "iterations": entries,
        "n_iterations": len(entries),
        "errors": sum("error" in e for e in entries),
        "invalid": 0,
        "recorded_at": "2026-01-01T00:00:00+00:00",
        **extra,
    }


def write_results(directory: Path, rows: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for family in sorted({r["family"] for r in rows}):
        lines = [json.dumps(r, sort_keys=True) for r in rows if r["family"] == family]
        (directory / f"{family}.jsonl").write_text("\n".join(lines) + "\n")
    return directory


# --- the tests, on data with known answers ------------------------------------------------------


def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_pairs():
    # 8 items only A gets right, 2 only B, 10 both: p = 2 * P(X <= 2), X ~ Bin(10, 1/2)
    a = [1] * 8 + [0] * 2 + [1] * 10
    b = [0] * 8 + [1] * 2 + [1] * 10
    result = mcnemar_exact(a, b)
    expected = 2 * sum(math.comb(10, k) for k in range(3)) / 2**10
    assert result.test == MCNEMAR and result.discordant == (8, 2) and result.n == 20
    assert result.p == pytest.approx(expected) == pytest.approx(0.109375)
    assert result.difference == pytest.approx(6 / 20)
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]).p == 1.0  # no discordant pair
    assert mcnemar_exact([1] * 6, [0] * 6).p == pytest.approx(2 / 2**6)
    assert paired_test(a, b).test == MCNEMAR
    assert paired_test([0.5, 1.0], [0.0, 1.0]).test == PERMUTATION


def brute_force_sign_flip_p(a: list[float], b: list[float]) -> float:
    """Every one of the 2^n sign flips of the paired differences, counted by hand."""
    differences = [x - y for x, y in zip(a, b, strict=True)]
    observed = abs(sum(differences))
    flips = list(itertools.product((1, -1), repeat=len(differences)))
    flipped = [abs(sum(s * d for s, d in zip(signs, differences, strict=True))) for signs in flips]
    extreme = sum(1 for value in flipped if value >= observed - 1e-12)
    return extreme / len(flips)


def test_the_paired_permutation_test_is_exact_for_few_pairs():
    generator = random.Random(3)
    for n in (5, 8, 11):
        a = [generator.uniform(0, 1) for _ in range(n)]
        b = [x - generator.uniform(-0.2, 0.6) for x in a]
        result = paired_permutation(a, b)
        assert result.test == PERMUTATION and result.n == n
        assert result.p == pytest.approx(brute_force_sign_flip_p(a, b))
        assert result.difference == pytest.approx(sum(a) / n - sum(b) / n)
    # five differences, all positive: only the all-plus and all-minus flips are as extreme
    assert paired_permutation([2.0, 3, 4, 5, 6], [1.0, 1, 1, 1, 1]).p == pytest.approx(2 / 32)
    assert paired_permutation([0.3, 0.4], [0.3, 0.4]).p == 1.0


def test_the_paired_permutation_test_finds_a_real_shift_and_no_false_one():
    generator = random.Random(0)
    base = [generator.gauss(0, 1) for _ in range(200)]
    noise = [generator.gauss(0, 0.3) for _ in range(200)]
    shifted = [x + 0.3 + e for x, e in zip(base, noise, strict=True)]
    assert paired_permutation(shifted, base).p < 0.001
    same = [x + e for x, e in zip(base, noise, strict=True)]
    assert paired_permutation(same, base).p > 0.05
    assert paired_permutation(shifted, base).p == paired_permutation(shifted, base).p  # seeded


def test_holm_on_a_hand_computed_example():
    # sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []
    assert holm([0.2]) == [0.2]


# --- stale and mixed rows -----------------------------------------------------------------------


def test_older_scoring_versions_and_other_iteration_counts_are_left_out_and_said():
    rows = [row("fam", "a", f"c{i}", [1.0], scoring_version=2) for i in range(4)]
    rows += [row("fam", "a", f"old{i}", [0.0], scoring_version=1) for i in range(3)]
    rows += [row("fam", "b", f"c{i}", [0.0]) for i in range(2)]  # only version 1: all stale
    rows += [row("fam", "a", "thrice", [0.0, 0.0, 0.0], scoring_version=2)]
    rows += [row("fam", "a", "broken", [None], scoring_version=2)]  # an error row is always counted
    selection = select({"fam": typed(rows)})
    kept = {r.item for r in selection.rows["fam"]}
    assert kept == {"c0", "c1", "c2", "c3", "broken"}
    notes = [left.note() for left in selection.left_out]
    assert notes == [
        "fam: 3 row(s) of a left out: scoring version 1 is older than 2 (rerun them)",
        "fam: 1 row(s) of a left out: run with 3 iteration(s) per item, not 1 like the rest",
        "fam: 2 row(s) of b left out: scoring version 1 is older than 2 (rerun them)",
    ]
    tables = aggregate({"fam": typed(rows)}, all_families())
    assert [left.note() for left in tables.left_out] == notes  # the terminal and the report say the same
    (line,) = tables.families[0].lines
    assert (line.model, line.mean, line.n, line.items, line.errors) == ("a", 1.0, 4, 5, 1)


# --- tables, pairing, ranks ---------------------------------------------------------------------


def test_models_pair_on_shared_items_or_else_on_cases_and_errors_are_not_zeros():
    rows = []
    for i in range(12):  # an LLM with two prompt variants per case, an embedder with one item per case
        rows.append(row("rag", "llm", f"c{i}:simple", [1.0], test="test_rag"))
        rows.append(row("rag", "llm", f"c{i}:strict", [1.0 if i % 2 else 0.0], test="test_rag"))
        rows.append(row("rag", "emb", f"c{i}", [0.0], test="test_rag_by_similarity"))
        rows.append(row("rag", "emb2", f"c{i}", [1.0 if i < 9 else 0.0], test="test_rag_by_similarity"))
    rows.append(row("rag", "emb2", "c12", [None], test="test_rag_by_similarity"))
    tables = aggregate({"rag": typed(rows)}, all_families())
    (table,) = tables.families
    assert [line.model for line in table.lines] == ["emb2", "llm", "emb"]
    emb2 = table.lines[0]
    assert (emb2.mean, emb2.items, emb2.errors) == (0.75, 13, 1)  # the error is left out, not a zero
    found = {(c.a, c.b): c for c in table.comparisons}
    on_items = found[("emb2", "emb")]
    assert on_items.unit == "items" and on_items.test is not None
    assert on_items.test.test == MCNEMAR and on_items.test.discordant == (9, 0) and on_items.test.n == 12
    on_cases = found[("llm", "emb")]
    assert on_cases.unit == "cases" and on_cases.test is not None
    assert on_cases.test.test == PERMUTATION and on_cases.test.n == 12  # the LLM's means over its variants
    assert on_cases.test.difference == pytest.approx(0.75)
    adjusted = holm([c.test.p for c in table.comparisons if c.test is not None])
    assert [c.p_holm for c in table.comparisons] == pytest.approx(adjusted)
    # llm vs emb has the smallest p (12 positive differences: 2 / 2^12), so this one is second: x 2
    assert on_cases.test.p == pytest.approx(2 / 2**12)
    assert on_items.significant and on_items.p_holm == pytest.approx(2 * 2 / 2**9)
    assert table.versus_next("emb2") == found[("emb2", "llm")]
    assert table.versus_next("emb") is None


def test_ranks_never_separate_what_the_data_cannot_and_the_overview_sorts_by_mean_rank():
    rows = [row("one", m, f"i{i}", [s]) for m, s in (("a", 0.9), ("b", 0.9), ("c", 0.1)) for i in range(12)]
    rows += [row("two", m, f"i{i}", [s]) for m, s in (("a", 0.2), ("c", 0.8)) for i in range(12)]
    rows += [row("two", "d", "i0", [None])]
    rows += [row("three", m, f"i{i}", [s]) for m, s in (("a", 0.9), ("c", 0.1)) for i in range(3)]
    tables = aggregate(rows_by_family(rows), all_families())
    one, three, two = tables.families
    assert one.ranks == {"a": 1, "b": 1, "c": 3}  # a and b tie; both are significantly better than c
    assert [line.same_as_above for line in one.lines] == [False, True, False]
    assert two.ranks == {"c": 1, "a": 2}  # d has no score, so no rank
    # three items each: no test can separate them (the smallest p is 2/8), so nobody is ranked
    assert three.ranks == {} and three.unranked.startswith("not ranked: too few cases")
    overview = [(o.model, o.mean_rank) for o in tables.overview]
    assert overview == [("b", 1.0), ("a", 1.5), ("c", 2.0), ("d", None)]


def test_a_model_with_partial_coverage_is_marked_and_never_ranked_above_full_coverage():
    rows = [row("fam", "full", f"c{i}", [0.5]) for i in range(10)]
    rows += [row("fam", "other", f"c{i}", [0.4 + 0.2 * (i % 2)]) for i in range(10)]
    rows += [row("fam", "part", "c0", [0.9])]  # n = 1, a better score
    (table,) = aggregate({"fam": typed(rows)}, all_families()).families
    assert [line.model for line in table.lines] == ["full", "other", "part"]
    part = table.lines[2]
    assert part.partial and part.coverage == "partial (1 of 10 cases)" and part.rank == 3
    assert part.label == "part partial (1 of 10 cases)"
    assert (part.low, part.high) == (None, None)  # one continuous value has no interval
    test = find(table.comparisons, "full", "part")
    assert test is not None and test.note == "too few shared cases" and test.test is None


# --- ranks that never mislead ----------------------------------------------------------------------


def only_the_top_pair_differs() -> list[dict[str, Any]]:
    """A > B > C by mean over 12 cases, and only A vs B is significant: B trails A by 0.05 on
    every case, while C swings between 0 and 1 around a mean just below B's."""
    rows = []
    for i in range(12):
        a = 0.55 + 0.01 * (i % 3)
        rows += [row("ranking", "A", f"c{i}", [a]), row("ranking", "B", f"c{i}", [round(a - 0.05, 2)])]
        rows.append(row("ranking", "C", f"c{i}", [float(i % 2)]))
    return rows


def test_ranks_never_go_back_down_the_list():
    (table,) = aggregate(rows_by_family(only_the_top_pair_differs()), all_families()).families
    assert {(c.a, c.b) for c in table.comparisons if c.significant} == {("A", "B")}
    # C cannot be told from B, so it shares B's rank; it never outranks B, whose mean is higher
    assert [(line.model, line.rank, line.same_as_above) for line in table.lines] == [
        ("A", 1, False),
        ("B", 2, False),
        ("C", 2, True),
    ]


def separated(comparisons: list[Comparison], x: Line, y: Line) -> bool:
    """x significantly better than y, or one with full coverage and the other partial."""
    found = find(comparisons, x.model, y.model)
    return x.partial != y.partial or (found is not None and found.better == x.model)


def test_every_rank_rests_on_the_tests_whatever_they_say():
    generator = random.Random(7)
    for _ in range(300):
        models = [f"m{i}" for i in range(6)]
        lines = []
        for model in models:
            attempted = generator.choice([20, 20, 20, 12])  # now and then a partial model
            lines.append(Line(model, "fam", generator.random(), None, None, "none", 20, 20, attempted, 0, 0))
            lines[-1].attempted, lines[-1].expected_cases = attempted, 20
        tested = PairedTest(PERMUTATION, 20, 0.1, 0.01)
        comparisons = [
            Comparison("fam", a, b, "cases", 20, tested, p_holm=generator.choice([0.001, 0.5]))
            for a, b in itertools.combinations(models, 2)
        ]
        assert assign_ranks(lines, comparisons) == ""
        apart = partial(separated, comparisons)
        order = [(line.partial, -(line.mean or 0.0)) for line in lines]
        ranks = [line.rank or 0 for line in lines]
        assert order == sorted(order) and ranks == sorted(ranks)  # full coverage first, by mean; never back down
        for place, line in enumerate(lines, start=1):
            above = lines[: place - 1]
            sharing = [other for other in above if other.rank == line.rank]
            assert not any(apart(other, line) for other in sharing)  # a shared rank is never a lie
            assert line.same_as_above == bool(sharing)
            if not sharing and above:  # a new rank: its place, resting on a significant difference
                assert line.rank == place
                assert any(apart(other, line) for other in above if other.rank == above[-1].rank)


def erred_on_the_hard_cases() -> list[dict[str, Any]]:
    """16 cases: A errs on the 6 hard ones; on the 10 both finished, B = A + 0.05. A's mean (over
    the easy cases alone) is the higher, yet B is significantly better where both have a score."""
    rows = []
    for i in range(16):
        if i < 10:
            a = round(0.8 + 0.01 * (i % 5), 2)
            rows += [row("fam", "A", f"c{i}", [a]), row("fam", "B", f"c{i}", [round(a + 0.05, 2)])]
        else:
            rows += [row("fam", "A", f"c{i}", [None]), row("fam", "B", f"c{i}", [round(0.1 + 0.01 * (i % 3), 2)])]
    return rows


def versus_cells(tables: Any) -> dict[tuple[str, str], str]:
    """(family, model) -> the report's "vs next" cell, read off the report's own blocks."""
    from ragmatrix.report import content
    from ragmatrix.seam.blocks import Heading, Table

    cells: dict[tuple[str, str], str] = {}
    family = ""
    for block in content.build(tables, content.Plots(), content.Context(results="r")):
        if isinstance(block, Heading) and block.level == 2:
            family = block.text
        if isinstance(block, Table) and block.header[-1] == "vs next":
            for cells_of_row in block.rows:
                cells[(family, cells_of_row[1].split(" ")[0])] = cells_of_row[-1]
    return cells


def test_a_model_that_erred_on_the_hard_cases_is_never_ranked_apart_from_one_better_on_the_shared_ones():
    tables = aggregate(rows_by_family(erred_on_the_hard_cases()), all_families())
    (table,) = tables.families
    test = find(table.comparisons, "A", "B")
    assert test is not None and test.test is not None and test.significant
    assert test.test.difference == pytest.approx(-0.05) and test.better == "B"
    # listed by mean, A first; B is significantly better where both finished, so it shares A's rank
    assert [(line.label, line.rank, line.same_as_above) for line in table.lines] == [("A †", 1, False), ("B", 1, True)]
    assert versus_cells(tables)[("fam", "A")] == "< B (p = 0.002)"
    # the same scores with lower-is-better: now A is the better one where both finished
    lower = Comparison("fam", "A", "B", "cases", 10, test.test, test.p_holm, higher_is_better=False)
    assert lower.better == "A"


def synthetic_family(seed: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """A family of known structure: each model has a skill, each case a difficulty; some models
    err on the hardest cases (their mean then rests on the easy ones only). Returns the rows and
    every model's scores by case, to check the report against."""
    generator = random.Random(seed)
    family = f"fam{seed:02d}"
    difficulty = {f"c{i}": generator.uniform(0.0, 0.6) for i in range(16)}
    hardest = sorted(difficulty, key=difficulty.__getitem__, reverse=True)
    scores: dict[str, dict[str, float]] = {}
    rows = []
    for m in range(generator.choice([3, 4])):
        model, skill = f"m{m}", generator.uniform(0.4, 0.9)
        erred = set(hardest[: generator.choice([0, 0, 4, 6, 8])])
        scores[model] = {}
        for case, hard in difficulty.items():
            if case in erred:
                rows.append(row(family, model, case, [None]))
                continue
            value = round(min(1.0, max(0.0, skill - hard + generator.gauss(0.0, 0.03))), 2)
            scores[model][case] = value
            rows.append(row(family, model, case, [value]))
    return rows, scores


def test_on_families_of_known_structure_every_rank_and_every_vs_next_points_the_right_way():
    rows, truth = [], {}
    for seed in range(50):
        found, scores = synthetic_family(seed)
        rows += found
        truth[f"fam{seed:02d}"] = scores
    tables = aggregate(rows_by_family(rows), all_families())
    cells = versus_cells(tables)

    def shared_difference(family: str, x: str, y: str) -> float:
        """Mean of x - y over the cases both finished, computed here from the scores drawn."""
        shared = sorted(set(truth[family][x]) & set(truth[family][y]))
        return sum(truth[family][x][c] - truth[family][y][c] for c in shared) / len(shared)

    def significantly_better(table: Any, x: str, y: str) -> bool:
        test = find(table.comparisons, x, y)
        return test is not None and test.significant and shared_difference(table.family, x, y) > 0

    new_ranks = shared = worse_cells = better_cells = 0
    for table in tables.families:
        assert not table.unranked
        lines = table.lines
        for place, line in enumerate(lines, start=1):
            group = [other for other in lines[: place - 1] if other.rank == line.rank]
            # a shared rank: nobody it shares with is significantly better on the shared cases
            assert not any(significantly_better(table, other.model, line.model) for other in group), line
            if place > 1 and not line.same_as_above:  # a new rank rests on a better model above
                new_ranks += 1
                last = [other for other in lines[: place - 1] if other.rank == lines[place - 2].rank]
                assert any(significantly_better(table, other.model, line.model) for other in last), line
            shared += line.same_as_above
            if place == len(lines):
                continue
            below, cell = lines[place].model, cells[(table.family, line.model)]
            if cell.startswith(">"):
                better_cells += 1
                assert significantly_better(table, line.model, below), (table.family, cell)
            elif cell.startswith("<"):
                worse_cells += 1
                assert significantly_better(table, below, line.model), (table.family, cell)
            else:
                assert not significantly_better(table, line.model, below), (table.family, cell)
                assert not significantly_better(table, below, line.model), (table.family, cell)
    # the families exercise every case of the rule
    assert new_ranks >= 20 and shared >= 5 and better_cells >= 20 and worse_cells >= 2


def test_a_table_too_small_to_separate_any_pair_has_no_ranks_and_says_so():
    # a two-case run: four prompt wordings per case; one model never gives a valid answer
    rows = []
    for case in ("c0", "c1"):
        for wording in ("w1", "w2", "w3", "w4"):
            rows.append(row("fam", "good", f"{case}:{wording}", [1.0]))
            rows.append(row("fam", "bad", f"{case}:{wording}", [0.0], details={"valid": False}))
    (table,) = aggregate(rows_by_family(rows), all_families()).families
    assert [(line.model, line.rank, line.invalid) for line in table.lines] == [("good", None, 0), ("bad", None, 8)]
    assert table.unranked == (
        "not ranked: too few cases to tell any two models apart (two models share at most 2; "
        "a difference needs at least 6 to be significant)"
    )
    # where the line lies: one pair needs 6 cases (2 / 2^6 < 0.05); three pairs, Holm-adjusted, need 7
    for cases, models, ranks in ((5, 2, [None] * 2), (6, 2, [1, 2]), (6, 3, [None] * 3), (7, 3, [1, 2, 2])):
        scores = {"good": 1.0, "bad": 0.0, "worse": 0.0}
        rows = [row("fam", m, f"c{i}", [scores[m]]) for m in list(scores)[:models] for i in range(cases)]
        (table,) = aggregate(rows_by_family(rows), all_families()).families
        assert [line.rank for line in table.lines] == ranks, (cases, models)
        assert bool(table.unranked) == (ranks[0] is None)
    # one model alone is ranked: there is nobody to tell it from
    (table,) = aggregate(rows_by_family([row("fam", "alone", "c0", [0.5])]), all_families()).families
    assert table.lines[0].rank == 1 and table.unranked == ""


def test_overview_ties_are_broken_by_score_never_by_name():
    one_case = [row("fam", "ada", "c0", [0.6]), row("fam", "zed", "c0", [0.78])]
    assert [o.model for o in aggregate(rows_by_family(one_case), all_families()).overview] == ["zed", "ada"]
    # twelve cases, both rank 1: the tie in mean rank goes to the better mean
    rows = [row("fam", "ada", f"c{i}", [round(0.7 + 0.1 * (-1) ** i, 2)]) for i in range(12)]
    rows += [row("fam", "zed", f"c{i}", [round(0.72 + 0.1 * (-1) ** (i // 2), 2)]) for i in range(12)]
    tables = aggregate(rows_by_family(rows), all_families())
    assert tables.families[0].ranks == {"zed": 1, "ada": 1}
    assert [(o.model, o.mean_rank, o.mean_place) for o in tables.overview] == [("zed", 1.0, 1.0), ("ada", 1.0, 2.0)]


def test_a_model_that_ran_fewer_variants_is_marked_partial_and_listed_after():
    rows = []
    for i in range(8):
        for chunking in ("line", "semantic", "bounded"):
            rows.append(row("code_retrieval", "every", f"q{i}:{chunking}", [0.5 + 0.05 * (i % 3)]))
        rows.append(row("code_retrieval", "line-only", f"q{i}:line", [0.95]))  # the easiest chunking, alone
        if i < 4:
            rows.append(row("code_retrieval", "half", f"q{i}:line", [0.9]))
    (table,) = aggregate(rows_by_family(rows), all_families()).families
    assert [(line.label, line.rank) for line in table.lines] == [
        ("every", 1),
        ("line-only partial (1 of 3 variants)", 2),
        ("half partial (4 of 8 cases, 1 of 3 variants)", 2),  # 4 shared cases cannot tell it from line-only
    ]
    # an LLM's prompt wordings and an embedder's single item are different tests: nobody is short
    rows = [row("rag", "llm", f"c{i}:{w}", [1.0], test="test_rag") for i in range(8) for w in ("simple", "strict")]
    rows += [row("rag", "emb", f"c{i}", [0.0], test="test_rag_by_similarity") for i in range(8)]
    (table,) = aggregate(rows_by_family(rows), all_families()).families
    assert [(line.label, line.rank) for line in table.lines] == [("llm", 1), ("emb", 2)]


def test_a_stats_code_change_recomputes_the_remembered_numbers(tmp_path, monkeypatch):
    results = write_results(tmp_path / "results", only_the_top_pair_differs())
    cache = tmp_path / "cache"
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(cache))
    assert main(["report", "--results-dir", str(results)]) == 0
    honest = (results / "report" / "leaderboard.md").read_text()
    memo = json.loads((cache / "stats.json").read_text())
    assert memo["version"] == code_version()
    # numbers the memo serves (here made up, as older code could have left them) ...
    for key, value in memo["entries"].items():
        if isinstance(value, list) and len(value) == 4 and value[3] == "bootstrap":
            memo["entries"][key] = [value[0], 0.111, 0.999, "bootstrap"]
    (cache / "stats.json").write_text(json.dumps(memo))
    assert main(["report", "--results-dir", str(results)]) == 0
    assert "[0.111, 0.999]" in (results / "report" / "leaderboard.md").read_text()
    # ... are never served by other statistics code: they are computed again
    memo["version"] = "the statistics code before an upgrade"
    (cache / "stats.json").write_text(json.dumps(memo))
    assert main(["report", "--results-dir", str(results)]) == 0
    assert (results / "report" / "leaderboard.md").read_text() == honest
    assert json.loads((cache / "stats.json").read_text())["version"] == code_version()


def test_the_stats_version_follows_the_statistics_source(tmp_path):
    copy = tmp_path / "stats"
    shutil.copytree(Path(ragmatrix.stats.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert ragmatrix.stats.version_of(copy) == code_version()
    significance = copy / "significance.py"
    significance.write_text(significance.read_text().replace("ALPHA = 0.05", "ALPHA = 0.01"))
    assert ragmatrix.stats.version_of(copy) != code_version()


def typed(rows: list[dict[str, Any]]) -> list[Row]:
    return [Row.model_validate(r) for r in rows]


def rows_by_family(rows: list[dict[str, Any]]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in typed(rows):
        out.setdefault(r.family, []).append(r)
    return out


# --- the report -----------------------------------------------------------------------------------


def shipped_like_rows(shift: float = 0.0) -> list[dict[str, Any]]:
    """A small result set with the shape of every shipped family."""
    rows = []
    for i in range(10):
        rows.append(row("rag_interpretation", "strong", f"q{i}", [1.0], test="test_rag_interpretation_by_similarity"))
        weak = 1.0 if i < 3 else 0.0
        rows.append(row("rag_interpretation", "weak", f"q{i}", [weak], test="test_rag_interpretation_by_similarity"))
    for model, base in (("strong", 0.9), ("weak", 0.5)):
        for chunking in ("line", "semantic"):
            for i in range(6):
                value = min(1.0, base + shift + 0.01 * i)
                metrics = {"ndcg_at_10": value, "answer_hit_at_1": float(i % 2)}
                rows.append(row("code_retrieval", model, f"q{i}:{chunking}", [value], details={"metrics": metrics}))
        by_length = {str(n): {"rss": 400 * base - 10 * n, "td": 0.1, "bu": 0.1} for n in (4, 8)}
        for mode in ("native", "merger"):
            details = {"by_length": by_length, "mode": mode, "rss_ci95": [100.0, 200.0], "chunking": "64 words"}
            rows.append(row("rss_probes", model, f"docs:{mode}", [400 * base - 60], details=details))
        for i in range(4):
            zelo = {"d1": 1.0, "d2": 0.0, "d3": -1.0}
            battles = [["d1", "d2", -0.8], ["d2", "d3", -0.5], ["d3", "d1", 0.9]]
            details = {"zelo": zelo, "battles": battles, "metrics": {"ndcg@5": base, "kendall_tau_b": base - 0.1}}
            rows.append(row("zelo_battles", model, f"topic{i}", [base - 0.01 * i], details=details))
    rows.append(row("zelo_battles", "weak", "topic9", [None]))
    rows.append(row("zelo_battles", "weak", "stale", [0.1], scoring_version=0))
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        results = write_results(tmp_path_factory.mktemp("project") / "results", shipped_like_rows())
        assert main(["report", "--results-dir", str(results)]) == 0
    return results / "report"


def test_the_report_writes_markdown_html_and_plots(report):
    names = sorted(p.name for p in report.iterdir())
    assert names == [
        "bars_code_retrieval.png",
        "bars_rag_interpretation.png",
        "bars_rss_probes.png",
        "bars_zelo_battles.png",
        "by_variant_code_retrieval.png",
        "leaderboard.html",
        "leaderboard.json",
        "leaderboard.md",
        "rss_by_length.png",
        "zelo_heatmap_topic0_strong.png",
        "zelo_heatmap_topic0_weak.png",
    ]
    for png in report.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 200_000
    text = (report / "leaderboard.md").read_text()
    # one RSS case, four zELO cases: too few to tell any two models apart, so nobody is ranked there
    assert "| 1 | strong | 1.00 | 0.925 (#1) | 1.000 (#1) | 300.000 (unranked) | 0.885 (unranked) |" in text
    assert "| 2 | weak | 2.00 | 0.525 (#2) | 0.300 (#2) | 140.000 (unranked) | 0.485 (unranked) † |" in text
    assert text.count("Not ranked: too few cases to tell any two models apart") == 2
    # rag: 7 discordant pairs, all for strong: McNemar p = 2 / 2^7, one test so Holm changes nothing
    assert "| strong | weak | items | 10 | +0.700 | McNemar (exact), discordant 7 vs 0 | 0.016 | 0.016 | yes |" in text
    assert "| 1 | strong | 1.000 | [0.722, 1.000] | 10 | 10 | 10 | 0 | 0 | > weak (p = 0.016) |" in text
    # code retrieval: 6 cases x 2 chunkings pair on the 6 per-case means, not on 12 items
    assert "| strong | weak | cases | 6 | +0.400 | paired permutation | 0.031 | 0.031 | yes |" in text
    assert "| - | strong | 300.0 | [300.0, 300.0] | 2 | 2 | 1 | 0 | 0 | too few shared cases with weak |" in text
    assert "zelo_battles: 1 row(s) of weak left out: scoring version 0 is older than 1 (rerun them)" in text
    # an error item: marked, counted, and not a zero
    assert "| - | weak † | 0.485 | [0.475, 0.495] | 4 | 5 | 4 | 1 | 0 |  |" in text
    assert "![rss_probes: mean RSS by sequence length, a line per model and mode](rss_by_length.png)" in text
    assert "| strong | line | 6 | 6 |" in text  # metrics per chunking strategy
    assert "| strong | line | semantic | cases | 6 | +0.000 | paired permutation | 1.000 | 1.000 | no |" in text


def test_the_html_is_one_self_contained_file(report):
    page = (report / "leaderboard.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 8
    assert "<script" not in page and "<link" not in page and "@import" not in page and "url(" not in page
    assert not re.search(r"(src|href)=\"(?!data:)", page)
    assert page.count("<table>") == (report / "leaderboard.md").read_text().count("\n|---")
    assert "<strong>mean</strong>" in page and "<code>ragmatrix report</code>" in page


def test_compare_prints_what_changed(tmp_path, capsys):
    old = write_results(tmp_path / "old", shipped_like_rows())
    rows = [r for r in shipped_like_rows(shift=0.09) if r["item"] != "q9"]
    rows.append(row("rag_interpretation", "newcomer", "q0", [1.0], test="test_rag_interpretation_by_similarity"))
    rows.append(row("rag_interpretation", "strong", "q10", [1.0], test="test_rag_interpretation_by_similarity"))
    new = write_results(tmp_path / "new", rows)
    assert main(["report", "--results-dir", str(new), "--compare", str(old), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert f"changes since {old}:" in out
    assert "  rag_interpretation: new model newcomer: 1.000 [0.207, 1.000], n=1" in out
    assert "  rag_interpretation: 1 new item(s): q10" in out
    assert "  rag_interpretation: 1 removed item(s): q9" in out
    assert re.search(r"code_retrieval: weak moved beyond its 95% CI: 0\.525 \[.*\], n=12 -> 0\.615", out)
    assert "rss_probes" not in out and "zelo_battles: strong" not in out  # unchanged
    assert "Changes since" in (tmp_path / "r" / "leaderboard.md").read_text()
    assert main(["report", "--results-dir", str(old), "--compare", str(old), "--out", str(tmp_path / "r")]) == 0
    assert f"no changes since {old}" in capsys.readouterr().out


def test_report_problems_are_one_line(tmp_path, capsys):
    assert main(["report", "--results-dir", str(tmp_path / "missing")]) == 1
    assert main(["report", "--results-dir", str(tmp_path)]) == 1
    write_results(tmp_path, shipped_like_rows())
    assert main(["report", "--results-dir", str(tmp_path), "--heatmap", "nope"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith("missing: no such results folder")
    assert err[1].endswith("no result rows (run `pytest benchmark` first)")
    assert err[2].startswith("error: no zelo_battles item nope (items: stale, topic0,")


ODD_IDS = ["$\\frac{1}{$", "price $a$ and $b$", "m" * 300]  # rows of a merged store may hold any id


def test_a_report_on_odd_model_ids_is_written_whole(tmp_path, capsys):
    """Ids that are mathtext to matplotlib, or longer than a file name may be, are drawn and
    named as they are, or cut with a digest; the report is written, with every model in it."""
    from ragmatrix.report.document import _md_text

    rows = shipped_like_rows()
    for odd in ODD_IDS:
        rows += [dict(r, model=odd) for r in shipped_like_rows() if r["model"] == "weak"]
    results = write_results(tmp_path / "results", rows)
    assert main(["report", "--results-dir", str(results), "--heatmap", "topic0"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    report = results / "report"
    text = (report / "leaderboard.md").read_text()
    assert all(_md_text(odd) in text for odd in ODD_IDS)  # as markdown shows it: escaped, then as it is
    heatmaps = sorted(p.name for p in report.glob("zelo_heatmap_topic0_*.png"))
    assert len(heatmaps) == 2 + len(ODD_IDS)
    assert max(len(name.encode()) for name in heatmaps) < 255
    long_one = [name for name in heatmaps if "mmmm" in name]
    assert len(long_one) == 1 and re.fullmatch(r"zelo_heatmap_topic0_m{69}-[0-9a-f]{10}\.png", long_one[0])


def test_after_a_benchmark_run_the_report_shows_the_terminal_numbers(bench, server):
    server.answer = lambda messages: "yes"
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["results: benchmark/results (significance tests, plots and HTML: ragmatrix report)"])
    terminal = [line.split()[:10] for line in result.outlines if line.split()[1:2] in (["scripted"], ["bow"])]
    assert len(terminal) == 2
    results = bench.path / "benchmark" / "results"
    assert main(["report", "--results-dir", str(results)]) == 0
    text = (results / "report" / "leaderboard.md").read_text()
    for rank, model, mean, low, high, n, items, cases, errors, invalid in terminal:
        assert f"| {rank} | {model} | {mean} | {low} {high} | {n} | {items} | {cases} | {errors} | {invalid} |" in text
    assert (results / "report" / "leaderboard.html").is_file()
    assert (results / "report" / "bars_rag_interpretation.png").is_file()


def terminal_table(result: Any, heading: str) -> list[list[str]]:
    """The rows of one family's leaderboard table as the terminal printed them, cell by cell."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    body = lines[start + 1 :]
    header = next(i for i, line in enumerate(body) if line.startswith("rank"))
    table = []
    for line in body[header + 2 :]:
        if not line.strip() or not re.match(r"\s*(\d+≈?|-)\s{2}", line):
            break
        table.append(re.split(r"\s{2,}", line.strip()))
    return table


def test_a_small_run_is_marked_and_left_unranked_alike_in_the_terminal_and_the_report(bench, server):
    late = "  - id: bow-late\n    kind: embedder\n    builtin: bow\n"
    write(bench.path / "benchmark" / "models.yaml", models_yaml(server.base_url, late))
    server.on("EGFR", Reply.error(500))  # scripted fails both of its items on one case
    server.answer = "no"
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "not (bow-late and pathway_no)")
    unranked = (
        "not ranked: too few cases to tell any two models apart (two models share at most 1; "
        "a difference needs at least 6 to be significant)"
    )
    table = terminal_table(result, "rag_interpretation:")
    labels = [cells[1] for cells in table]
    assert labels == ["scripted †", "bow", "bow-late partial (1 of 2 cases)"]
    assert unranked in result.outlines
    assert [cells[0] for cells in table] == ["-", "-", "-"]  # three cases: no 1≈ for everyone
    results = bench.path / "benchmark" / "results"
    assert main(["report", "--results-dir", str(results)]) == 0
    text = (results / "report" / "leaderboard.md").read_text()
    assert unranked[0].upper() + unranked[1:] + "." in text
    for rank_cell, label, mean, *_ in table:  # the report marks every model as the terminal does
        assert f"| {rank_cell} | {label} | {mean} |" in text
    assert re.search(r"\| scripted \| - \| 0\.667 \(unranked\) † \|", text)


def test_ranks_variants_and_ties_read_alike_in_the_terminal_and_the_report(bench, server):
    rows = only_the_top_pair_differs()
    for i in range(8):  # every chunking for one model, only the easiest for the other
        rows += [row("chunked", "every", f"q{i}:{chunking}", [0.6]) for chunking in ("line", "semantic", "bounded")]
        rows.append(row("chunked", "line-only", f"q{i}:line", [0.95]))
    rows += [row("one_case", "ada", "c0", [0.6]), row("one_case", "zed", "c0", [0.78])]
    results = write_results(bench.path / "benchmark" / "results", rows)
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "bow")
    ranking = terminal_table(result, "ranking:")
    assert [(cells[0], cells[1]) for cells in ranking] == [("1", "A"), ("2", "B"), ("2≈", "C")]
    chunked = terminal_table(result, "chunked:")
    assert [(cells[0], cells[1]) for cells in chunked] == [("1", "every"), ("2", "line-only partial (1 of 3 variants)")]
    assert main(["report", "--results-dir", str(results)]) == 0
    text = (results / "report" / "leaderboard.md").read_text()
    for rank_cell, label, mean, *_ in ranking + chunked:
        assert f"| {rank_cell} | {label} | {mean} |" in text
    # the overview: one case ranks nobody, and the better score is listed first, not the first name
    overview = [line.split(" | ")[1] for line in text.splitlines() if re.match(r"\| \d+ \| ", line)]
    assert overview.index("zed") < overview.index("ada")
    assert "| zed | - | - | 0.780 (unranked) | - | - |" in text


# --- integrity ----------------------------------------------------------------------------------


def test_a_hand_edited_score_is_caught_by_the_checksum(tmp_path, capsys):
    results = write_results(tmp_path / "results", shipped_like_rows())
    assert main(["checksum", str(results)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["checksum", str(results)]) == 0
    assert "ok: 4 file(s)" in capsys.readouterr().out

    # reordering and reformatting the rows is not a change
    path = results / "rag_interpretation.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(json.dumps(json.loads(line), indent=None) for line in reversed(lines)) + "\n")
    assert checksum.verify(results) == []

    # one score edited by hand
    edited = [json.loads(line) for line in path.read_text().splitlines()]
    edited[0]["score"] = 0.99 if edited[0]["score"] != 0.99 else 0.98
    path.write_text("\n".join(json.dumps(r, sort_keys=True) for r in edited) + "\n")
    assert main(["checksum", str(results)]) == 1
    out = capsys.readouterr().out
    assert "checksum mismatch: rag_interpretation.jsonl: rows changed since checksums.json was written (20 rows)" in out
    intro = _report_intro(results, tmp_path)
    assert "Checksum mismatch" not in intro  # the alarm is for a verify that was asked for
    assert "the results changed since `checksums.json` was last written" in intro
    assert "--write`" in intro

    # a file removed, another added
    (results / "rss_probes.jsonl").rename(results / "rss_copy.jsonl")
    problems = checksum.verify(results)
    assert "rss_copy.jsonl: not in checksums.json (a new file)" in problems
    assert "rss_probes.jsonl: missing (listed in checksums.json)" in problems

    assert main(["checksum", str(results), "--write"]) == 0
    assert checksum.verify(results) == []
    assert "every row matches" in _report_intro(results, tmp_path)


def _report_intro(results: Path, tmp_path: Path) -> str:
    written = write_report(results, tmp_path / "report", all_families())
    return written.markdown.read_text().split("## How to read it")[0]


# --- the page in a browser ----------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",  # runs as root in CI containers
        "--disable-gpu",
        "--no-first-run",
        "--allow-file-access-from-files",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_the_page_shows_its_tables_and_images_in_headless_chromium(report, tmp_path):
    from matplotlib.image import imread

    page = report / "leaderboard.html"
    shot = tmp_path / "page.png"
    result = chromium(f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri(), profile=tmp_path / "p1")
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    pixels = imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1280
    rgb = pixels[..., :3]
    coloured = ((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).mean()  # the bars, lines and heatmaps
    assert coloured > 0.005

    # The same page with a probe that reports, once the page has loaded, every table and
    # whether every image decoded (the report itself has no script).
    probe = (
        "<script>window.addEventListener('load', () => { const images = [...document.images];"
        " document.body.dataset.tables = document.querySelectorAll('table').length;"
        " document.body.dataset.images = images.filter(i => i.complete && i.naturalWidth > 0).length + '/'"
        " + images.length; });</script></body>"
    )
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", probe))
    result = chromium("--dump-dom", probed.as_uri(), profile=tmp_path / "p2")
    assert result.returncode == 0, result.stderr[-2000:]
    tables = page.read_text().count("<table>")
    assert f'data-tables="{tables}"' in result.stdout
    assert 'data-images="8/8"' in result.stdout
    assert "strong" in result.stdout and "McNemar (exact)" in result.stdout
    assert [line for line in result.stderr.splitlines() if ":CONSOLE" in line] == []


# --- any subset of rows renders -------------------------------------------------------------------


def test_the_report_renders_from_one_row_from_two_models_sharing_one_item_and_from_nothing(tmp_path, capsys):
    one = write_results(tmp_path / "one", [row("code_retrieval", "a", "q0:line", [0.7])])
    assert main(["report", "--results-dir", str(one)]) == 0
    text = (one / "report" / "leaderboard.md").read_text()
    assert "| 1 | a | 0.700 | - | 1 | 1 | 1 | 0 | 0 |  |" in text  # one continuous value: no interval
    shared = [row("code_retrieval", m, "q0:line", [s]) for m, s in (("a", 0.7), ("b", 0.4))]
    two = write_results(tmp_path / "two", shared)  # scipy's permutation test refuses one pair
    assert main(["report", "--results-dir", str(two)]) == 0
    text = (two / "report" / "leaderboard.md").read_text()
    assert "| a | b | items | 1 | - | too few shared cases | - | - | - |" in text
    assert "| - | b | 0.400 |" in text  # one shared item cannot rank them
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "rag_interpretation.jsonl").write_text("")
    assert main(["report", "--results-dir", str(empty)]) == 1
    assert "no result rows" in capsys.readouterr().err
    tables = aggregate({}, all_families())
    assert tables.families == [] and tables.overview == []


def test_the_headline_and_the_metric_table_give_one_mean_one_interval():
    rows = []
    for i in range(8):  # 8 cases x 3 chunkings: the interval resamples cases in both tables
        for chunking, shift in (("line", 0.0), ("semantic", 0.05), ("bounded", 0.1)):
            value = round(0.3 + 0.07 * i + shift, 3)
            rows.append(
                row("code_retrieval", "m", f"q{i}:{chunking}", [value], details={"metrics": {"ndcg_at_10": value}})
            )
    (table,) = aggregate({"code_retrieval": typed(rows)}, all_families()).families
    (line,) = table.lines
    (pooled,) = table.metrics
    metric = pooled.values["ndcg_at_10"]
    assert line.method == metric.method == "case bootstrap"
    assert (line.mean, line.low, line.high) == pytest.approx((metric.mean, metric.low, metric.high))


def test_paired_tests_pair_on_case_means_when_a_case_gives_several_items():
    rows = []
    for i in range(6):
        for chunking in ("line", "semantic", "bounded"):
            rows.append(row("code_retrieval", "a", f"q{i}:{chunking}", [0.9 if i % 2 else 0.6]))
            rows.append(row("code_retrieval", "b", f"q{i}:{chunking}", [0.5]))
    (table,) = aggregate({"code_retrieval": typed(rows)}, all_families()).families
    (comparison,) = table.comparisons
    # 6 cases, not 18 items: the three chunkings of a query are one observation
    assert (comparison.unit, comparison.pairs) == ("cases", 6)
    assert comparison.test is not None and comparison.test.p == pytest.approx(2 / 2**6)
    # each model's variants against each other: identical here, so p = 1 after Holm
    assert {(c.model, c.a, c.b) for c in table.variant_comparisons} >= {("a", "bounded", "line")}
    assert all(c.p_holm == 1.0 for c in table.variant_comparisons)


def test_report_finds_the_results_from_a_subfolder_of_the_project(tmp_path, monkeypatch, capsys):
    write_results(tmp_path / "benchmark" / "results", shipped_like_rows())
    (tmp_path / "benchmark" / "data" / "corpus").mkdir(parents=True)
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path / "benchmark" / "data" / "corpus")
    assert main(["report"]) == 0
    page = (tmp_path / "benchmark" / "results" / "report" / "leaderboard.md").read_text()
    assert "from `benchmark/results`" in page  # named as the project names it, not by a machine path
    # outside any project: one line naming where it looked
    monkeypatch.chdir(tmp_path.parent)
    assert main(["report"]) == 1
    assert "no benchmark/results here or in a folder above" in capsys.readouterr().err

"""A row belongs to a models.yaml id: a second id with the same settings computes its own rows,
and is never ranked on the few it happens to share."""

from __future__ import annotations

import json

from project import assert_outcomes, models_yaml, write


def rows(bench) -> list[dict]:
    path = bench.path / "benchmark" / "results" / "rag_interpretation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_duplicate_settings_id_gets_its_own_full_set_of_rows(bench, server):
    server.answer = lambda messages: "yes"
    run = ("benchmark", "-p", "no:cacheprovider", "-k", "bow")
    bench.runpytest(*run).assert_outcomes(passed=2)
    write(
        bench.path / "benchmark" / "models.yaml",
        models_yaml(server.base_url, extra="  - id: bow-again\n    kind: embedder\n    builtin: bow\n"),
    )
    result = bench.runpytest(*run)
    assert_outcomes(result, passed=2, cached=2)  # bow's own rows are cached; bow-again computes its own
    stored = rows(bench)
    mine = {r["item"]: r for r in stored if r["model"] == "bow-again"}
    theirs = {r["item"]: r for r in stored if r["model"] == "bow"}
    assert set(mine) == set(theirs) == {"pathway_yes", "pathway_no"}
    # the same settings give the same key and the same answers, each under its own id
    assert all(mine[i]["key"] == theirs[i]["key"] and mine[i]["score"] == theirs[i]["score"] for i in mine)
    # and both are ranked on their full sets: equal means, equal counts (mean, interval, n, items,
    # cases, errors, invalid); bow-again's texts came from bow's embedding cache: it has no speed
    table = [line.split() for line in result.outlines if line.split()[1:2] in (["bow"], ["bow-again"])]
    assert len(table) == 2 and table[0][2:10] == table[1][2:10]
    assert_outcomes(bench.runpytest(*run), cached=4)

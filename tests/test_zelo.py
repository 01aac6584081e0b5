"""zELO battles: pairs, parsing, combining, the metrics on hand-computed examples, scoring, the
similarity judges, the ensemble entry of models.yaml, and the shipped cases."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from project import bag_of_words, counting_bag_of_words

from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec
from ragmatrix.stats import metrics
from ragmatrix.suite.loader import expand_case, load_suite
from ragmatrix.zelo import battles as zelo
from ragmatrix.zelo.judges import (
    Judgement,
    SimilarityJudge,
    combine_judgements,
    combine_scores,
    parse_verdict,
)

ROOT = Path(__file__).resolve().parents[1]


def make_case(documents: dict[str, str], relevance: dict[str, int], **settings) -> zelo.ZeloCase:
    data = {"query": "q", "instruction": "judge", "documents": documents, **settings}
    return zelo.ZeloCase.model_validate({"input": data, "expected": {"relevance": relevance}})


# --- pairs ------------------------------------------------------------------------------------


def test_random_cycles_pair_every_document_twice_per_cycle_and_are_seeded():
    plan = zelo.plan_matchups(10, 4, seed=7)
    assert len(plan) == 40
    for cycle in range(4):
        appearances = Counter(d for m in plan if m.cycle == cycle for d in (m.a, m.b))
        assert appearances == {d: 2 for d in range(10)}
    assert plan == zelo.plan_matchups(10, 4, seed=7)
    assert plan != zelo.plan_matchups(10, 4, seed=8)
    assert 10 <= sum(m.swapped for m in plan) <= 30  # a fair coin, seeded
    assert len(zelo.plan_matchups(2, 3, seed=0)) == 3  # two documents: one pair per cycle
    assert zelo.plan_matchups(1, 3, seed=0) == []


def test_both_orders_judges_each_pair_in_both_orders():
    plan = zelo.plan_matchups(6, 2, seed=1, both_orders=True)
    assert len(plan) == 24
    for first, second in zip(plan[::2], plan[1::2], strict=True):
        assert (first.pair, first.a, first.b) == (second.pair, second.a, second.b)
        assert first.shown == second.shown[::-1]


def test_document_order_in_the_yaml_does_not_change_the_plan():
    one = make_case({"x": "1", "y": "2", "z": "3"}, {"x": 0, "y": 1, "z": 2})
    two = make_case({"z": "3", "x": "1", "y": "2"}, {"x": 0, "y": 1, "z": 2})
    assert one.input.ids == two.input.ids == ["x", "y", "z"]
    assert one.input.texts == two.input.texts


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "score", "problem"),
    [
        ('{"reasoning": "B answers it", "score": 0.8}', 0.8, None),
        ('Sure.\n```json\n{"reasoning": "A is better", "score": -1}\n```', -1.0, None),
        ('{"score": "0.25", "reasoning": "close"}', 0.25, None),
        ('draft {"score": 0.9} then {"reasoning": "final", "score": -0.3}', -0.3, None),
        ("B explains the mechanism.\nSCORE: 0.6", 0.6, None),
        ("Reasoning: A is on topic only.\n**Score:** -0.75", -0.75, None),
        ("Final score = 1.", 1.0, None),
        ("0", 0.0, None),
        ("", None, "empty answer"),
        ("   \n ", None, "empty answer"),
        ("<html>502 Bad Gateway</html>", None, "no score found"),
        ("Document B is clearly better.", None, "no score found"),
        ("I'm sorry, but I can't help with comparing these documents.", None, "refusal: no score given"),
        ('{"reasoning": "B", "score": 1.5}', None, "score 1.5 is outside [-1, 1]"),
        ("SCORE: -2", None, "score -2 is outside [-1, 1]"),
        ('{"score": NaN}', None, "score is not a finite number"),
        ('{"score": "high"}', None, "score 'high' is not a number"),
        ('{"score": true}', None, "score 'True' is not a number"),
        ('{"reasoning": "no score here"}', None, "no score found"),
    ],
)
def test_parse_verdict(answer, score, problem):
    verdict = parse_verdict(answer)
    assert verdict.score == score
    assert verdict.problem == problem


def test_the_reasoning_is_kept():
    assert parse_verdict('{"reasoning": "B explains it", "score": 1}').reasoning == "B explains it"
    assert parse_verdict("Reasoning: A is off topic.\nSCORE: 1").reasoning == "A is off topic."


# --- combining --------------------------------------------------------------------------------


def test_vote_keeps_signs_and_mean_keeps_magnitudes():
    assert combine_scores([0.2, 0.9, -0.1], "vote") == pytest.approx(1 / 3)
    assert combine_scores([0.2, 0.9, -0.1], "mean") == pytest.approx(1 / 3)
    assert combine_scores([0.1, 0.1, -1.0], "vote") == pytest.approx(1 / 3)
    assert combine_scores([0.1, 0.1, -1.0], "mean") == pytest.approx(-0.8 / 3)
    assert combine_scores([0.0, 0.5], "vote") == 0.5


def test_zbench_vote_counts_a_score_of_exactly_zero_for_a():
    # zbench: the share of members scoring above 0 is the probability that B wins
    assert combine_scores([0.0, 0.5, -0.2], "zbench_vote") == pytest.approx(2 * (1 / 3) - 1)
    assert combine_scores([0.0, 0.5, -0.2], "vote") == 0.0  # here 0 is half a vote each way
    # without a member at exactly 0, the two rules agree
    for scores in ([0.2, 0.9, -0.1], [-1.0, -0.3, 0.4], [0.1, 0.2, 0.3]):
        assert combine_scores(scores, "zbench_vote") == pytest.approx(combine_scores(scores, "vote"))


def test_an_ensemble_judgement_needs_a_majority_of_valid_members():
    valid, invalid = Judgement(0.5, calls=1), Judgement(None, invalid_reason="no score found", calls=2)
    two_of_three = combine_judgements([valid, invalid, Judgement(-0.5, calls=1)], ["a", "b", "c"], "vote")
    assert two_of_three.score == 0.0 and two_of_three.calls == 4
    one_of_three = combine_judgements([valid, invalid, invalid], ["a", "b", "c"], "vote")
    assert one_of_three.score is None and "1 of 3 members" in str(one_of_three.invalid_reason)
    assert combine_judgements([valid, invalid], ["a", "b"], "mean").score is None


# --- metrics on hand-computed examples ---------------------------------------------------------


def test_ndcg_with_linear_gains_by_hand():
    labels = {"a": 3, "b": 2, "c": 0, "d": 1}
    # ranking c, a, d, b: DCG@3 = 0/1 + 3/log2(3) + 1/2; ideal 3, 2, 1: 3 + 2/log2(3) + 1/2
    dcg = 3 / math.log2(3) + 1 / 2
    ideal = 3 + 2 / math.log2(3) + 1 / 2
    assert metrics.ndcg_at_k(["c", "a", "d", "b"], labels, 3) == pytest.approx(dcg / ideal)
    assert metrics.ndcg_at_k(["a", "b", "d", "c"], labels, 3) == pytest.approx(1.0)


def test_pairwise_accuracy_leaves_out_truth_ties_and_halves_system_ties():
    truth = {"a": 3, "b": 2, "c": 2, "d": 0}
    # truth orders 5 pairs (b, c tied); the system gets a>b, a>c, b>d right, c>d wrong,
    # and ties a with... nothing: 4 of 5
    system = {"a": 0.9, "b": 0.5, "c": -0.2, "d": 0.1}
    assert metrics.pairwise_accuracy(system, truth) == pytest.approx(4 / 5)
    tied = {"a": 0.9, "b": 0.5, "c": 0.1, "d": 0.1}  # c = d tied by the system: half a pair
    assert metrics.pairwise_accuracy(tied, truth) == pytest.approx(4.5 / 5)
    assert metrics.pairwise_accuracy(system, {"a": 1, "b": 1}) is None


def test_kendall_tau_b_by_hand():
    # x = 1, 2, 3, 4 and y = 1, 3, 2, 4: 5 concordant, 1 discordant pair, no ties: (5 - 1) / 6
    assert metrics.kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # y tied on one pair: (n_c - n_d) / sqrt((n0 - n1)(n0 - n2)) = (5 - 0) / sqrt(6 * 5)
    assert metrics.kendall_tau_b([1, 2, 3, 4], [1, 2, 2, 4]) == pytest.approx(5 / math.sqrt(30))
    assert metrics.kendall_tau_b([1, 1, 1], [1, 2, 3]) is None


def test_fleiss_kappa_on_the_textbook_example():
    # Fleiss (1971) as reproduced on Wikipedia: 10 subjects, 14 raters, 5 categories, kappa 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert metrics.fleiss_kappa(table) == pytest.approx(0.20993, abs=1e-5)
    assert metrics.fleiss_kappa([[3, 0], [3, 0]]) is None  # one category only: undefined
    assert metrics.fleiss_kappa([[2, 0], [0, 2]]) == pytest.approx(1.0)


def test_a_perfect_order_scores_one_at_any_scale_of_the_zelos():
    labels = {"a": 3, "b": 2, "c": 0}
    for size in (1e-10, 1.0, 1e6):
        found = zelo.ranking_metrics({"a": 3 * size, "b": 2 * size, "c": size}, labels, k=2, relevant_from=2)
        assert found["ndcg@2"] == 1.0 and found["pairwise_accuracy"] == 1.0


def test_ranking_breaks_ties_against_the_system_and_the_metrics_by_hand():
    labels = {"a": 3, "b": 0, "c": 2, "d": 1}
    scores = {"a": 1.0, "b": 0.5, "c": 0.5, "d": -1.0}
    assert zelo.ranking(scores, labels) == ["a", "b", "c", "d"]  # b and c tied: the lower label first
    found = zelo.ranking_metrics(scores, labels, k=2, relevant_from=2)
    ideal = 3 + 2 / math.log2(3)
    assert found["ndcg@2"] == pytest.approx(3 / ideal, abs=1e-6)
    assert found["recall@2"] == 0.5  # of a and c, only a is in the top 2
    # pairs: a>b a>c a>d right; b<c tied (half); b<d wrong; c>d right: 4.5 of 6
    assert found["pairwise_accuracy"] == pytest.approx(4.5 / 6, abs=1e-6)
    assert found["kendall_tau_b"] == pytest.approx(metrics.kendall_tau_b([1, 0.5, 0.5, -1], [3, 0, 2, 1]), abs=1e-6)


# --- scoring ----------------------------------------------------------------------------------


def battles_from(case: zelo.ZeloCase, judge) -> zelo.Battles:
    """Battles judged by a function of the shown documents' ids (no model)."""
    ids = case.input.ids
    plan = zelo.plan_matchups(len(ids), case.input.cycles, case.input.seed, case.input.both_orders)
    return zelo.Battles(ids, plan, [judge(ids[m.shown[0]], ids[m.shown[1]]) for m in plan], judge_calls=len(plan))


LABELS = {"d1": 3, "d2": 0, "d3": 2, "d4": 1, "d5": 0, "d6": 1}


def test_a_judge_that_follows_the_labels_ranks_perfectly():
    case = make_case({d: f"text {d}" for d in LABELS}, LABELS, both_orders=True)
    perfect = zelo.score(case, battles_from(case, lambda a, b: Judgement((LABELS[b] - LABELS[a]) / 3)))
    assert perfect.valid and perfect.score == 1.0
    details = perfect.details
    assert details["metrics"]["pairwise_accuracy"] == 1.0 and details["metrics"]["recall@5"] == 1.0
    assert details["position_consistency"] == 1.0 and details["invalid_answers"] == 0
    assert details["components"] == 1
    zelos = details["zelo"]
    assert zelos["d1"] > zelos["d3"] > max(zelos["d4"], zelos["d6"]) > max(zelos["d2"], zelos["d5"])
    assert abs(sum(zelos.values())) < 1e-5
    for d, (low, high) in details["zelo_ci"].items():
        assert low <= zelos[d] + 1e-9 and zelos[d] <= high + 1e-9
    assert len(details["battles"]) == details["judgements"] == 2 * 4 * 6


def test_a_judge_that_always_prefers_the_second_document_is_position_inconsistent():
    case = make_case({d: f"text {d}" for d in LABELS}, LABELS, both_orders=True)
    outcome = zelo.score(case, battles_from(case, lambda a, b: Judgement(1.0)))
    assert outcome.details["position_consistency"] == 0.0
    assert outcome.details["position_bias"] == 1.0
    assert set(outcome.details["zelo"].values()) == {0.0}  # every pair won once each way


def test_invalid_answers_are_counted_and_never_votes():
    case = make_case({d: f"text {d}" for d in LABELS}, LABELS)

    def judge(a, b):
        if "d1" in (a, b):
            return Judgement(None, answer="garbage", invalid_reason="no score found", calls=2)
        return Judgement((LABELS[b] - LABELS[a]) / 3, calls=1)

    outcome = zelo.score(case, battles_from(case, judge))
    details = outcome.details
    assert details["invalid_answers"] == sum(1 for b in details["battles"] if b[2] is None) > 0
    assert details["invalid_reasons"] == {"no score found": details["invalid_answers"]}
    assert details["zelo"]["d1"] == pytest.approx(0.0, abs=1e-9)  # never compared validly
    assert details["position_consistency"] is None  # one order only
    # d1 was never compared validly: two components, d1 alone and the rest
    assert details["components"] == 2
    nothing = zelo.score(case, battles_from(case, lambda a, b: Judgement(None, invalid_reason="empty answer")))
    assert not nothing.valid and nothing.score == 0.0
    assert nothing.details["components"] == len(LABELS)


def test_a_fit_that_does_not_converge_is_an_invalid_outcome(monkeypatch):
    from ragmatrix.stats import bradley_terry

    case = make_case({d: f"text {d}" for d in LABELS}, LABELS)

    def fit_briefly(n, observations, *args, **kwargs):
        return original(n, observations, max_iterations=1)

    original = bradley_terry.fit
    monkeypatch.setattr(bradley_terry, "fit", fit_briefly)
    outcome = zelo.score(case, battles_from(case, lambda a, b: Judgement((LABELS[b] - LABELS[a]) / 3)))
    assert not outcome.valid and outcome.score == 0.0
    assert outcome.details["invalid_reason"].startswith("Bradley-Terry fit did not converge after 1 iterations")


# --- the similarity judges --------------------------------------------------------------------


def CountingBagOfWords():
    """The bag-of-words embedder, recording the batches that reach its model
    (`model.provider.batches`)."""
    return bag_of_words(provider=counting_bag_of_words())


DOCUMENTS = {
    "d1": "Metformin lowers blood glucose by suppressing glucose production in the liver.",
    "d2": "The French lilac was used in medieval herbal medicine.",
    "d3": "Metformin also raises insulin sensitivity in muscle, lowering glucose.",
    "d4": "Metformin tablets come in 500 mg doses.",
}
DOC_LABELS = {"d1": 3, "d2": 0, "d3": 2, "d4": 1}


def test_the_embedder_judge_embeds_each_case_once_and_scores_the_cosine_difference():
    bow = CountingBagOfWords()
    case = make_case(DOCUMENTS, DOC_LABELS)
    case.input.query = "How does metformin lower blood glucose?"
    battles = zelo.battle(bow, case)
    # the query, then every document: one batch each, not one per pair
    assert [len(b) for b in bow.provider.batches] == [1, 4]
    similarities = bow.similarities(case.input.query, case.input.texts)
    for matchup, judgement in zip(battles.matchups, battles.judgements, strict=True):
        a, b = matchup.shown
        assert judgement.score == pytest.approx(similarities[b] - similarities[a])
    assert battles.judge_calls == 1
    assert zelo.score(case, battles).details["metrics"]["ndcg@5"] > 0.9


class FixedScores:
    """A retriever with given scores, larger than 1 like BM25's."""

    id = "fixed"

    def similarities(self, query, documents):
        return [4.0, 0.0, 2.0, 1.0][: len(documents)]


def test_scores_larger_than_one_are_divided_by_the_largest():
    from ragmatrix.models import aio

    judge = SimilarityJudge(FixedScores(), "q", ["a", "b", "c", "d"])
    assert judge.scale == 4.0
    assert aio.run(judge.judge(1, 0)).score == 1.0  # 4 - 0, over 4
    assert aio.run(judge.judge(0, 2)).score == -0.5
    aio.close()


def test_the_bm25_judge_scales_its_scores_into_minus_one_to_one():
    bm25 = Registry(use_cache=False).build(ModelSpec(id="bm25", kind="retriever", builtin="bm25"))
    judge = SimilarityJudge(bm25, "metformin metformin glucose liver", list(DOCUMENTS.values()))
    assert judge.scale == max(1.0, *judge.similarities)
    case = make_case(DOCUMENTS, DOC_LABELS)
    case.input.query = "How does metformin lower blood glucose?"
    battles = zelo.battle(bm25, case)
    assert all(-1.0 <= j.score <= 1.0 for j in battles.judgements)
    assert max(abs(j.score) for j in battles.judgements) > 0.3


# --- the ensemble in models.yaml --------------------------------------------------------------

MODELS = """
models:
  - {id: a, kind: llm, litellm: openai/a, params: {temperature: 0}}
  - {id: b, kind: llm, litellm: openai/b}
  - {id: c, kind: llm, litellm: openai/c, requires_env: [RAGMATRIX_TEST_UNSET_KEY]}
  - {id: bow, kind: embedder, builtin: bow}
  - {id: ab, kind: ensemble, ensemble: [a, b], combine: mean}
  - {id: abc, kind: ensemble, ensemble: [a, b, c]}
"""


def test_an_ensemble_entry_is_its_own_judge_keyed_by_its_members(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGMATRIX_TEST_UNSET_KEY", raising=False)
    path = tmp_path / "models.yaml"
    path.write_text(MODELS)
    specs = {s.id: s for s in load_models(path)}
    ab = specs["ab"]
    assert [m.id for m in ab.members] == ["a", "b"] and ab.combine == "mean" and specs["abc"].combine == "vote"
    assert ab.output_fingerprint() == {
        "provider": "ensemble",
        "combine": "mean",
        "members": [specs["a"].output_fingerprint(), specs["b"].output_fingerprint()],
    }
    chosen = select_models(list(specs.values()), None)
    assert chosen.left_out["abc"] == "member c: RAGMATRIX_TEST_UNSET_KEY not set"
    assert [m.id for m in chosen.of_kind("judge")] == ["a", "b", "bow", "ab"]
    assert [m.id for m in chosen.of_kind("llm")] == ["a", "b"]  # an ensemble cannot chat
    # the ensemble is available even when only it is asked for
    assert [m.id for m in select_models(list(specs.values()), ["ab"]).available] == ["ab"]
    ensemble = Registry(use_cache=False).build(ab)
    assert [m.id for m in ensemble.members] == ["a", "b"] and ensemble.combine == "mean"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{id: e, kind: ensemble, ensemble: [a, nope]}", "ensemble member 'nope' is not in the file"),
        ("{id: e, kind: ensemble, ensemble: [a, bow]}", "ensemble member 'bow' is an embedder, not an llm"),
        ("{id: e, kind: ensemble, ensemble: [a]}", "at least two different members"),
        ("{id: e, kind: ensemble, ensemble: [a, b], litellm: openai/x}", "it takes no litellm"),
        ("{id: e, kind: llm, ensemble: [a, b]}", "an ensemble is of kind ensemble"),
    ],
)
def test_a_bad_ensemble_entry_is_one_line(tmp_path, entry, message):
    path = tmp_path / "models.yaml"
    path.write_text(MODELS.split("  - {id: ab")[0] + f"  - {entry}\n")
    with pytest.raises(ModelsFileError, match=message):
        load_models(path)


# --- cases ------------------------------------------------------------------------------------


def test_case_validation_is_one_line():
    raw = {
        "case": "c",
        "input": {"query": "q", "instruction": {"x": "judge"}, "documents": {"a": "A", "b": "B"}},
        "expected": {"relevance": {"a": 2, "b": 0}},
    }
    cases, problem = expand_case("zelo_battles", raw, "f.yaml")
    assert problem is None and [c.id for c in cases] == ["c:x"]  # documents are not variants
    for relevance, message in [
        ({"a": 2}, "expected.relevance: no label for b"),
        ({"a": 1, "b": 1}, "expected.relevance: give at least two different grades, or nothing can be ranked"),
        ({"a": 1, "b": 0}, "expected.relevance: no document is graded 2 or more"),
        ({"a": 4, "b": 1}, "expected.relevance.a: Input should be less than or equal to 3"),
    ]:
        raw["expected"] = {"relevance": relevance}
        assert expand_case("zelo_battles", raw, "f.yaml")[1].line() == f"f.yaml: case 'c': {message}"


def test_the_shipped_cases_meet_the_coverage_the_family_promises():
    suite = load_suite(ROOT / "benchmark" / "data", ["zelo_battles"], root=ROOT)
    problems = [p.line() for p in suite.problems if p.family == "zelo_battles" or "zelo" in p.file]
    assert not problems
    cases = suite.cases["zelo_battles"]
    names = {c.name for c in cases}
    assert len(names) >= 12
    assert len({c.metadata.get("domain") for c in cases}) >= 3
    variants = Counter(c.name for c in cases)
    assert min(variants.values()) >= 2
    for case in cases:
        labels = list(case.expected.relevance.values())
        assert 8 <= len(labels) <= 12, case.name
        assert labels.count(1) >= 2, f"{case.name}: hard negatives (on topic, unhelpful) are graded 1"
        assert max(labels) == 3 and labels.count(0) >= 1

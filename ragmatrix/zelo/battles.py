"""zELO battles: a judge compares documents in pairs, Bradley–Terry turns the outcomes into one
strength per document (the zELO), and the resulting ranking is scored against graded labels.

- Pairs are drawn by seeded random cycles: shuffle the documents, pair each with the next one
  and the last with the first, `cycles` times. A seeded coin decides which document of each
  pair is shown first; with `both_orders`, each pair is judged in both orders and the judge's
  position consistency is reported.
- Every judgement of a case runs concurrently, under the model's concurrency limit.
- The ranking is scored with nDCG@k (linear gain from the labels), pairwise accuracy (pairs
  tied in the labels left out), Kendall's tau-b and recall@k.

The judges themselves live in `ragmatrix.zelo.judges`, the fit in `ragmatrix.stats.bradley_terry`.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from ragmatrix.foundations.data_model import DataModel
from ragmatrix.models.protocols import Judge, Messages, Model
from ragmatrix.seam.case import Case
from ragmatrix.seam.outcome import Outcome
from ragmatrix.stats import bradley_terry, metrics
from ragmatrix.zelo.judges import CaseJudge, Judgement, judge_for, judge_messages, sign

# Bump when scoring changes: every stored result of this family is then recomputed.
# 2: ties found relative to the score range (not by rounding); the comparison graph's
#    components in the details; a fit that does not converge is an invalid outcome.
SCORING_VERSION = 2

DEFAULT_CYCLES = 4
DEFAULT_K = 5
# recall@k counts the documents labelled at least this as the ones to find.
DEFAULT_RELEVANT_FROM = 2
# Fitted zELOs closer than this share of their range are a tie: the optimiser's own noise
# must not decide an order that the judgements leave open.
FIT_TIE_TOLERANCE = 1e-9

Grade = Annotated[int, Field(ge=0, le=3)]


# --- cases ------------------------------------------------------------------------------------


class ZeloInput(DataModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1)
    instruction: str = Field(min_length=1)  # the judge prompt: a variant set in the YAML
    documents: dict[str, str]  # id -> text; a plain mapping, not a variant set
    cycles: int = Field(default=DEFAULT_CYCLES, ge=1, le=50)
    seed: int = 0
    both_orders: bool = False

    @property
    def ids(self) -> list[str]:
        """Document ids in a fixed order (sorted), so that reordering the YAML changes nothing."""
        return sorted(self.documents)

    @property
    def texts(self) -> list[str]:
        return [self.documents[i] for i in self.ids]


class ZeloExpected(DataModel):
    model_config = ConfigDict(extra="forbid")
    relevance: dict[str, Grade]  # id -> 0 (off topic) .. 3 (answers the query)
    k: int = Field(default=DEFAULT_K, ge=1)
    relevant_from: Grade = DEFAULT_RELEVANT_FROM


class ZeloCase(DataModel):
    model_config = ConfigDict(extra="forbid")
    input: ZeloInput
    expected: ZeloExpected

    @model_validator(mode="after")
    def labels_match_documents(self) -> ZeloCase:
        # The message names its fields: a check of the whole case has no pydantic location.
        documents, labels = set(self.input.documents), set(self.expected.relevance)
        if len(documents) < 2:
            raise _problem("input.documents: a battle needs at least two documents")
        if documents != labels:
            missing = sorted(documents - labels)
            extra = sorted(labels - documents)
            what = f"no label for {', '.join(missing)}" if missing else f"labels for unknown {', '.join(extra)}"
            raise _problem(f"expected.relevance: {what}")
        grades = set(self.expected.relevance.values())
        if len(grades) < 2:
            raise _problem("expected.relevance: give at least two different grades, or nothing can be ranked")
        if max(grades) < self.expected.relevant_from:
            raise _problem(f"expected.relevance: no document is graded {self.expected.relevant_from} or more")
        return self


# A case of the zELO family, as its test receives it.
ZeloItem = Case[ZeloInput, ZeloExpected]


class ZeloDetails(DataModel):
    """What a zELO iteration records besides its score, as far as the report reads it."""

    model_config = ConfigDict(extra="ignore")

    zelo: dict[str, float]  # document -> zELO
    battles: list[tuple[str, str, float | None]]  # (first shown, second shown, judge's score)
    components: int | None = None  # of the comparison graph: zELOs of two are not comparable


def zelo_details(data: Mapping[str, Any]) -> ZeloDetails | None:
    """An iteration's recorded details as `ZeloDetails`; None for another shape (an error, an
    older row)."""
    try:
        return ZeloDetails.model_validate(data)
    except ValueError:
        return None


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError("zelo_case", message)


# --- pairs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Matchup:
    """One judgement to make: pair `pair` (documents a and b, as drawn) shown in some order."""

    pair: int
    cycle: int
    a: int
    b: int
    swapped: bool  # shown as (b, a)

    @property
    def shown(self) -> tuple[int, int]:
        return (self.b, self.a) if self.swapped else (self.a, self.b)


def random_cycles(n: int, cycles: int, rng: random.Random) -> list[tuple[int, int, int]]:
    """(cycle, a, b) for `cycles` random cycles over n items: n pairs per cycle (one for n = 2)."""
    pairs: list[tuple[int, int, int]] = []
    if n < 2:
        return pairs
    for cycle in range(cycles):
        order = list(range(n))
        rng.shuffle(order)
        links = 1 if n == 2 else n
        pairs += [(cycle, order[t], order[(t + 1) % n]) for t in range(links)]
    return pairs


def plan_matchups(n: int, cycles: int, seed: int | str, both_orders: bool = False) -> list[Matchup]:
    """The seeded plan of a case: the random cycles, then one coin per pair for the order
    shown; with `both_orders`, each pair also in the other order."""
    rng = random.Random(seed)
    drawn = random_cycles(n, cycles, rng)
    plan: list[Matchup] = []
    for index, (cycle, a, b) in enumerate(drawn):
        swapped = rng.random() < 0.5
        plan.append(Matchup(index, cycle, a, b, swapped))
        if both_orders:
            plan.append(Matchup(index, cycle, a, b, not swapped))
    return plan


@dataclass(frozen=True)
class BattlePlan:
    """What a case's battle asks, decided by the case alone: the scheduler sends its first round
    ahead, and `battle` asks the same plan, so that what is sent ahead is what is used."""

    query: str
    instruction: str  # the judge prompt
    documents: list[str]  # the texts, in id order
    matchups: list[Matchup]

    def messages(self, a: int, b: int) -> Messages:
        """What an LLM judge is asked of documents a and b, shown in that order."""
        return judge_messages(self.instruction, self.query, self.documents[a], self.documents[b])

    def first_round(self) -> list[Messages]:
        """Every distinct judgement an LLM judge makes on a first reading, in plan order: what
        `battle` asks before any re-ask of a malformed answer."""
        return [self.messages(a, b) for a, b in dict.fromkeys(m.shown for m in self.matchups)]

    def texts(self) -> tuple[list[str], list[str]]:
        """What a similarity judge embeds: the query, and the documents."""
        return [self.query], list(self.documents)


def battle_plan(case: ZeloItem) -> BattlePlan:
    data = case.input
    matchups = plan_matchups(len(data.ids), data.cycles, data.seed, data.both_orders)
    return BattlePlan(data.query, data.instruction, data.texts, matchups)


def first_requests(case: ZeloItem, model: Model) -> list[Messages]:
    """The first round of an LLM judge (or of each member of an ensemble): the plan's."""
    return battle_plan(case).first_round()


def first_texts(case: ZeloItem, model: Model) -> tuple[list[str], list[str]]:
    """The texts of a similarity judge: the plan's."""
    return battle_plan(case).texts()


# --- battles ----------------------------------------------------------------------------------


@dataclass
class Battles:
    """A case's judgements, in plan order."""

    ids: list[str]
    matchups: list[Matchup]
    judgements: list[Judgement]
    judge_calls: int  # model requests, retries and ensemble members included

    def oriented(self, index: int) -> float | None:
        """The score of judgement `index` for its pair as drawn: > 0 means b is more relevant."""
        score = self.judgements[index].score
        if score is None:
            return None
        return -score if self.matchups[index].swapped else score


async def run_matchups(judge: CaseJudge, matchups: Sequence[Matchup]) -> list[Judgement]:
    """Every judgement at once (the model's semaphore bounds what is in flight). A matchup
    shown exactly like an earlier one is asked once. The first model error cancels the rest
    and propagates."""
    tasks: dict[tuple[int, int], asyncio.Task[Judgement]] = {}
    try:
        async with asyncio.TaskGroup() as group:
            for matchup in matchups:
                if matchup.shown not in tasks:
                    tasks[matchup.shown] = group.create_task(judge.judge(*matchup.shown))
    except BaseExceptionGroup as failed:
        raise first_error(failed) from None
    return [tasks[m.shown].result() for m in matchups]


def first_error(group: BaseExceptionGroup) -> BaseException:
    """The first exception of a task group that failed, unwrapped."""
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            return first_error(error)
        return error
    return group


def battle(model: Judge, case: ZeloItem) -> Battles:
    """Judge the case's documents in pairs with any model that can compare: the case's plan
    (`battle_plan`), whose first round the scheduler sent ahead."""
    from ragmatrix.models import aio

    plan = battle_plan(case)
    (query,), documents = plan.texts()
    judge = judge_for(model, query, documents, plan.instruction, plan.messages)
    judgements = aio.run(run_matchups(judge, plan.matchups))
    ids = case.input.ids
    return Battles(ids, plan.matchups, judgements, judge.setup_calls + _calls(plan.matchups, judgements))


def _calls(plan: Sequence[Matchup], judgements: Sequence[Judgement]) -> int:
    seen: dict[tuple[int, int], int] = {}
    for matchup, judgement in zip(plan, judgements, strict=True):
        seen[matchup.shown] = judgement.calls
    return sum(seen.values())


# --- from battles to zELO ---------------------------------------------------------------------


def observation_groups(battles: Battles) -> list[list[bradley_terry.Observation]]:
    """Bradley–Terry observations grouped by pair (the unit the bootstrap resamples)."""
    groups: dict[int, list[bradley_terry.Observation]] = {}
    for index, matchup in enumerate(battles.matchups):
        score = battles.oriented(index)
        if score is not None:
            groups.setdefault(matchup.pair, []).append((matchup.a, matchup.b, (1.0 + score) / 2.0))
    return list(groups.values())


def position_consistency(battles: Battles) -> float | None:
    """Of the pairs judged validly in both orders, the share whose two verdicts agree in sign
    once the order is undone. None when no pair was judged both ways."""
    by_pair: dict[int, dict[bool, float]] = {}
    for index, matchup in enumerate(battles.matchups):
        score = battles.oriented(index)
        if score is not None:
            by_pair.setdefault(matchup.pair, {})[matchup.swapped] = score
    both = [orders for orders in by_pair.values() if len(orders) == 2]
    if not both:
        return None
    return sum(sign(orders[False]) == sign(orders[True]) for orders in both) / len(both)


def position_bias(battles: Battles) -> float | None:
    """The mean score as shown: > 0 means the judge leans to the second document shown."""
    scores = [j.score for j in battles.judgements if j.score is not None]
    return sum(scores) / len(scores) if scores else None


def ensemble_agreement(battles: Battles) -> dict[str, Any] | None:
    """For an ensemble: Fleiss' kappa on the members' signs (A, tie, B) and the share of
    unanimous judgements, over the distinct judgements every member answered validly."""
    unique: dict[tuple[int, int], Judgement] = {}
    for matchup, judgement in zip(battles.matchups, battles.judgements, strict=True):
        unique[matchup.shown] = judgement
    rated = [
        [sign(m.score) for m in j.members if m.score is not None]
        for j in unique.values()
        if j.members is not None and all(m.valid for m in j.members)
    ]
    if not any(j.members is not None for j in unique.values()):
        return None
    table = [[signs.count(-1.0), signs.count(0.0), signs.count(1.0)] for signs in rated]
    kappa = metrics.fleiss_kappa(table) if table else None
    unanimous = sum(max(row) == sum(row) for row in table) / len(table) if table else None
    return {
        "fleiss_kappa": _round(kappa),
        "unanimous": _round(unanimous),
        "judgements": len(table),
        "members": next(j.member_ids for j in unique.values() if j.members is not None),
    }


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(float(x), digits)


def tie_keys(scores: Mapping[str, float], tolerance: float = 0.0) -> dict[str, float]:
    """Each id's score, with scores that tie replaced by one value (the highest of the group).

    With `tolerance` 0, ties are exact equality. Otherwise scores tie when they lie within
    `tolerance` x (max - min) of the highest score of their group, walking from the top: the
    test depends on the scores' spread, never on their absolute size, so scores x 1e6 or x 1e-6
    give the same ties."""
    if not scores:
        return {}
    values = sorted(set(scores.values()), reverse=True)
    width = tolerance * (values[0] - values[-1])
    representative: dict[float, float] = {}
    top = values[0]
    for value in values:
        if top - value > width:
            top = value
        representative[value] = top
    return {i: representative[v] for i, v in scores.items()}


def ranking(scores: Mapping[str, float], labels: Mapping[str, float], tolerance: float = 0.0) -> list[str]:
    """Ids best first. Tied scores (see `tie_keys`) are broken against the system: the lower
    label first, so a judge earns nothing from documents it cannot tell apart."""
    keys = tie_keys(scores, tolerance)
    return sorted(scores, key=lambda i: (-keys[i], labels[i], i))


def ranking_metrics(
    scores: dict[str, float], labels: dict[str, int], k: int, relevant_from: int, tolerance: float = FIT_TIE_TOLERANCE
) -> dict[str, Any]:
    """nDCG@k (linear gain = label), pairwise accuracy, Kendall's tau-b and recall@k; scores
    within `tolerance` of the range tie."""
    ranked = ranking(scores, labels, tolerance)
    ids = sorted(labels)
    keys = tie_keys({i: scores[i] for i in ids}, tolerance)
    relevant = {i: float(labels[i] >= relevant_from) for i in ids}
    return {
        f"ndcg@{k}": _round(metrics.ndcg_at_k(ranked, labels, k)),
        "pairwise_accuracy": _round(metrics.pairwise_accuracy(keys, labels)),
        "kendall_tau_b": _round(metrics.kendall_tau_b([keys[i] for i in ids], [labels[i] for i in ids])),
        f"recall@{k}": _round(metrics.recall_at_k(ranked, relevant, k)),
    }


def score(case: ZeloItem, battles: Battles, samples: int = bradley_terry.BOOTSTRAP_SAMPLES) -> Outcome:
    """Fit the zELOs, then score their ranking against the case's labels. The row's score is
    nDCG@k; the other metrics, the zELOs with bootstrap intervals, the number of components of
    the comparison graph and every battle go in the details."""
    expected = case.expected
    ids = battles.ids
    labels = {i: expected.relevance[i] for i in ids}
    k = expected.k
    invalid = [j for j in battles.judgements if not j.valid]
    details: dict[str, Any] = {
        "k": k,
        "judgements": len(battles.judgements),
        "judge_calls": battles.judge_calls,
        "invalid_answers": len(invalid),
        "position_consistency": _round(position_consistency(battles)),
        "position_bias": _round(position_bias(battles)),
        "battles": [[ids[m.a], ids[m.b], _round(battles.oriented(index))] for index, m in enumerate(battles.matchups)],
    }
    if invalid:
        details["invalid_reasons"] = dict(Counter(str(j.invalid_reason) for j in invalid))
        details["invalid_examples"] = [j.answer[:300] for j in invalid[:3]]
    agreement = ensemble_agreement(battles)
    if agreement is not None:
        details["agreement"] = agreement
    groups = observation_groups(battles)
    observations = [o for g in groups for o in g]
    # zELOs of different components are on unrelated scales: their order means nothing.
    details["components"] = bradley_terry.components(len(ids), observations)
    if not groups:
        return Outcome.invalid("no valid judgement", **details)
    try:
        z = bradley_terry.fit(len(ids), observations)
        fits = bradley_terry.bootstrap(len(ids), groups, samples=samples, seed=case.input.seed)
    except bradley_terry.FitError as error:
        return Outcome.invalid(str(error), **details)
    zelo = dict(zip(ids, z, strict=True))
    found = ranking_metrics(zelo, labels, k, expected.relevant_from)
    ndcgs = [
        metrics.ndcg_at_k(ranking(dict(zip(ids, f, strict=True)), labels, FIT_TIE_TOLERANCE), labels, k) for f in fits
    ]
    intervals = [bradley_terry.percentile_interval([f[i] for f in fits]) for i in range(len(ids))]
    details.update(
        metrics=found,
        ndcg_ci=[_round(x) for x in bradley_terry.percentile_interval(ndcgs)],
        zelo={i: _round(v) for i, v in zelo.items()},
        zelo_ci={i: [_round(lo), _round(hi)] for i, (lo, hi) in zip(ids, intervals, strict=True)},
        bootstrap_samples=samples,
    )
    return Outcome(found[f"ndcg@{k}"], **details)

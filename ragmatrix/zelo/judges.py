"""Judges of a pairwise battle: which of two documents is more relevant to a query?

A judge answers with a score in [-1, 1] for the documents as shown: negative means document A
is more relevant, positive means document B is. Three kinds:

- an LLM, asked with an instruction (a prompt variant of the case) and parsed robustly: a
  JSON object with a `score`, or a tagged line `SCORE: <number>`. A malformed answer is asked
  again once, in a real second request that says what was wrong; if that fails too, the
  judgement is invalid. It is never turned into a vote;
- an ensemble of judges, combined by
  - `vote`: the mean of the members' signs, a score of exactly 0 counting as a tie (half a
    vote each way);
  - `zbench_vote`: zbench's own rule, the share of members whose score is above 0 as the
    probability that B wins, so a score of exactly 0 is a vote for A. It equals `vote`
    whenever no member answers exactly 0;
  - `mean`: the mean of the scores, that is the mean of (1 + score) / 2 as the probability
    that B wins.
  A judgement needs valid answers from a majority of the members;
- a similarity judge (an embedder or BM25): similarity(query, B) - similarity(query, A), from
  one batched call per case.

A model error (after the client layer's retries) propagates: the item becomes an error row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, cast

from ragmatrix.models.scored_answer import parse_verdict

if TYPE_CHECKING:
    from ragmatrix.models.protocols import ChatModel, Judge, Retriever

Combine = Literal["vote", "zbench_vote", "mean"]
COMBINE_RULES: tuple[Combine, ...] = ("vote", "zbench_vote", "mean")

# Used by the command line when no prompt is given; the benchmark's prompts live in its YAML.
DEFAULT_INSTRUCTION = (
    "You compare two documents retrieved for a search query and decide which one is more relevant: "
    "which one a person asking the query would rather read, because it answers the query more "
    "directly, completely and correctly. A document that is on the topic but does not help answer "
    "the query is not relevant. Do not prefer a document for its length or its position.\n\n"
    "Reply with one JSON object and nothing else: "
    '{"reasoning": "<two or three sentences>", "score": <a number from -1 to 1>}. '
    "The score is negative when Document A is more relevant and positive when Document B is, "
    "-1 or 1 when one is clearly better, and near 0 when they are about equally relevant."
)

RETRY_PROMPT = (
    "Your answer could not be read ({problem}). Answer again in the format the instructions ask "
    "for: your reasoning, then a score from -1 to 1 (negative: Document A is more relevant; "
    "positive: Document B is more relevant)."
)

Messages = list[dict[str, str]]


def judge_messages(instruction: str, query: str, a: str, b: str) -> Messages:
    """The instruction as the system message; the query and the two documents as the user's."""
    user = f"Query: {query}\n\nDocument A:\n{a}\n\nDocument B:\n{b}"
    return [{"role": "system", "content": instruction}, {"role": "user", "content": user}]


def retry_messages(messages: Messages, answer: str, problem: str) -> Messages:
    """The conversation asked again: the malformed answer, then what was wrong with it."""
    return [
        *messages,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": RETRY_PROMPT.format(problem=problem)},
    ]


# --- judges -----------------------------------------------------------------------------------


@dataclass
class Judgement:
    """One judge's verdict on two documents as shown (score > 0: B is more relevant)."""

    score: float | None
    reasoning: str = ""
    answer: str = ""
    invalid_reason: str | None = None
    calls: int = 0  # model requests made for it, retries and ensemble members included
    members: list[Judgement] | None = None  # an ensemble's member judgements, in member order
    member_ids: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.score is not None


class CaseJudge(Protocol):
    """A judge prepared for one query and its documents; documents are named by index."""

    id: str
    setup_calls: int  # model calls made to prepare it (a similarity judge embeds once)

    async def judge(self, a: int, b: int) -> Judgement: ...


class LLMJudge:
    """An LLM asked `messages(a, b)` for documents a and b as shown (by default `judge_messages`
    of the instruction, the query and the two documents)."""

    def __init__(
        self,
        model: ChatModel,
        instruction: str,
        query: str,
        documents: Sequence[str],
        messages: Callable[[int, int], Messages] | None = None,
    ) -> None:
        self.model = model
        self.id = str(model.id)
        self.instruction = instruction
        self.query = query
        self.documents = list(documents)
        self.messages = messages or self._messages
        self.setup_calls = 0

    def _messages(self, a: int, b: int) -> Messages:
        return judge_messages(self.instruction, self.query, self.documents[a], self.documents[b])

    async def judge(self, a: int, b: int) -> Judgement:
        messages = self.messages(a, b)
        answer = await self.model.achat(messages)
        verdict = parse_verdict(answer)
        if verdict.problem is None:
            return Judgement(verdict.score, verdict.reasoning, answer, calls=1)
        # A real second request: the conversation differs, so the response cache cannot replay
        # the first answer.
        again = await self.model.achat(retry_messages(messages, answer, verdict.problem))
        second = parse_verdict(again)
        if second.problem is None:
            return Judgement(second.score, second.reasoning, again, calls=2)
        return Judgement(None, second.reasoning, again, invalid_reason=second.problem, calls=2)


class SimilarityJudge:
    """cos(q, B) - cos(q, A) for an embedder; the same with BM25 scores for a retriever.

    Similarities come from one batched `similarities` call. Scores larger than 1 (BM25) are
    divided by the case's largest score, so that every difference lies in [-1, 1].
    """

    def __init__(self, model: Retriever, query: str, documents: Sequence[str]) -> None:
        self.id = str(model.id)
        self.similarities = [float(s) for s in model.similarities(query, list(documents))]
        self.scale = max([1.0, *(abs(s) for s in self.similarities)])
        self.setup_calls = 1

    async def judge(self, a: int, b: int) -> Judgement:
        sa, sb = self.similarities[a], self.similarities[b]
        score = max(-1.0, min(1.0, (sb - sa) / self.scale))
        return Judgement(score, f"similarity A {sa:.4f}, B {sb:.4f}")


class EnsembleJudge:
    def __init__(self, id: str, members: Sequence[CaseJudge], combine: Combine = "vote") -> None:
        if not members:
            raise ValueError("an ensemble needs members")
        self.id = id
        self.members = list(members)
        self.combine = combine
        self.setup_calls = sum(m.setup_calls for m in self.members)

    async def judge(self, a: int, b: int) -> Judgement:
        results = list(await asyncio.gather(*(m.judge(a, b) for m in self.members)))
        return combine_judgements(results, [m.id for m in self.members], self.combine)


def combine_judgements(results: list[Judgement], ids: list[str], how: Combine) -> Judgement:
    """The ensemble's judgement from its members': it needs valid scores from a majority."""
    valid = [r.score for r in results if r.score is not None]
    calls = sum(r.calls for r in results)
    needed = len(results) // 2 + 1
    if len(valid) < needed:
        reason = f"{len(valid)} of {len(results)} members gave a valid score (a majority is needed)"
        return Judgement(None, invalid_reason=reason, calls=calls, members=results, member_ids=ids)
    return Judgement(combine_scores(valid, how), calls=calls, members=results, member_ids=ids)


def combine_scores(scores: Sequence[float], how: Combine) -> float:
    if how == "vote":
        return sum(sign(s) for s in scores) / len(scores)
    if how == "zbench_vote":
        # the share of votes for B, p in [0, 1], as a score 2p - 1 in [-1, 1]
        return 2.0 * sum(1 for s in scores if s > 0) / len(scores) - 1.0
    if how == "mean":
        return sum(scores) / len(scores)
    raise ValueError(f"unknown combine rule {how!r} ({', '.join(COMBINE_RULES)})")


def sign(x: float) -> float:
    return float((x > 0) - (x < 0))


def judge_for(
    model: Judge,
    query: str,
    documents: Sequence[str],
    instruction: str,
    messages: Callable[[int, int], Messages] | None = None,
) -> CaseJudge:
    """The judge a model makes for one query: an ensemble, an LLM, or a similarity judge. An
    LLM is asked `messages(a, b)` (by default `judge_messages`) for each pair as shown."""
    from ragmatrix.models.protocols import ChatModel, JudgeEnsemble, Retriever

    if isinstance(model, JudgeEnsemble):
        judges = [judge_for(m, query, documents, instruction, messages) for m in model.members]
        return EnsembleJudge(model.id, judges, cast(Combine, model.combine))
    if isinstance(model, ChatModel):
        return LLMJudge(model, instruction, query, documents, messages)
    if isinstance(model, Retriever):
        return SimilarityJudge(model, query, documents)
    raise TypeError(f"model '{getattr(model, 'id', model)}' cannot judge pairs")

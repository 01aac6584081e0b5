"""What an annotation run judges: its settings and judges, each query's matchups, and the key
that finds a judgement again in the pairs file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragmatrix.foundations.keys import md5_of
from ragmatrix.zelo import battles as zelo
from ragmatrix.zelo import zbench_format
from ragmatrix.zelo.judges import Combine


class AnnotateError(Exception):
    """A problem to report in one line: the judges cannot be chosen, or a fit failed."""


@dataclass
class Settings:
    cycles: int = zelo.DEFAULT_CYCLES
    seed: int = 0
    both_orders: bool = False
    combine: Combine = "vote"
    instruction: str = ""
    scale: str = "z"  # "z" (natural-log units) or "elo" (1000 + 400 z / ln 10)
    document_limit: int | None = None


@dataclass
class JudgeModel:
    """A judge of the run: the built model and its output fingerprint (part of every key)."""

    id: str
    model: Any
    fingerprint: dict[str, Any]


def judgement_key(
    query: str, a: str, b: str, judge: JudgeModel, instruction: str, documents: Sequence[str] = ()
) -> str:
    """What a judgement depends on. An LLM reads the pair and the prompt; a similarity judge
    scales its scores over all the query's documents (BM25's IDF, the max-score scaling), so
    for it the document set counts too, and the prompt does not."""
    if getattr(judge.model, "kind", "llm") in ("llm", "ensemble"):
        context: dict[str, Any] = {"instruction": instruction}
    else:
        context = {"documents": md5_of(sorted(documents))}
    return md5_of({"query": query, "a": a, "b": b, "judge": judge.fingerprint, **context})


@dataclass
class Planned:
    """One query's plan: its documents, matchups, and the key of every (matchup, judge)."""

    item: zbench_format.QueryDocuments
    ids: list[str]
    texts: list[str]
    matchups: list[zelo.Matchup]
    keys: dict[tuple[int, int, str], str]  # (shown a, shown b, judge id) -> key


def plan(item: zbench_format.QueryDocuments, judges: Sequence[JudgeModel], settings: Settings) -> Planned:
    ids, texts = item.document_ids, item.contents
    if settings.document_limit is not None:
        ids, texts = ids[: settings.document_limit], texts[: settings.document_limit]
    matchups = zelo.plan_matchups(len(ids), settings.cycles, f"{settings.seed}:{item.id}", settings.both_orders)
    keys = {}
    for matchup in matchups:
        a, b = matchup.shown
        for judge in judges:
            keys[(a, b, judge.id)] = judgement_key(item.text, texts[a], texts[b], judge, settings.instruction, texts)
    return Planned(item, ids, texts, matchups, keys)

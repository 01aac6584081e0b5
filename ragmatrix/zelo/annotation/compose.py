"""From judgements to output: the annotated line (judges combined per matchup, Bradley–Terry, a
score per document) and the judgements in zbench's scored-pairs shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmatrix.stats import bradley_terry
from ragmatrix.zelo import zbench_format
from ragmatrix.zelo.annotation.plan import AnnotateError, JudgeModel, Planned, Settings
from ragmatrix.zelo.annotation.summary import Summary
from ragmatrix.zelo.judges import Judgement, combine_judgements


def compose(
    p: Planned,
    judges: Sequence[JudgeModel],
    settings: Settings,
    records: dict[str, Any],
    summary: Summary | None = None,
) -> dict[str, Any]:
    """The annotated line: the judges combined per matchup, Bradley–Terry, a score per document
    and the scale on the line."""
    observations = []
    for matchup in p.matchups:
        a, b = matchup.shown
        found = [_judgement(records[p.keys[(a, b, judge.id)]]) for judge in judges]
        combined = found[0] if len(found) == 1 else combine_judgements(found, [j.id for j in judges], settings.combine)
        if combined.score is not None:
            score = -combined.score if matchup.swapped else combined.score
            observations.append((matchup.a, matchup.b, (1.0 + score) / 2.0))
    try:
        z = bradley_terry.fit(len(p.ids), observations)
    except bradley_terry.FitError as error:
        raise AnnotateError(f"query {p.item.id!r}: {error}") from None
    parts = bradley_terry.components(len(p.ids), observations)
    if parts > 1 and summary is not None:
        summary.split_queries[p.item.id] = parts
    strengths = dict(zip(p.ids, z, strict=True))
    raw = dict(p.item.raw)
    documents = []
    for document in raw["documents"]:
        if str(document["id"]) in strengths:
            value = strengths[str(document["id"])]
            shown = bradley_terry.elo(value) if settings.scale == "elo" else value
            documents.append({**document, "score": round(shown, 6)})
    raw["documents"] = documents
    raw[zbench_format.SCALE_FIELD] = settings.scale
    return raw


def zbench_scored_pairs(
    p: Planned, judges: Sequence[JudgeModel], records: dict[str, Any]
) -> list[dict[str, Any] | None]:
    """One query's judgements as zbench's scored pairs, documents as shown (score > 0: B is
    more relevant). zbench holds three judges' scores per pair: three judges fill them in order,
    one judge fills all three. A pair that a judge did not score validly is None: zbench would
    read a missing score as 0, a vote for A."""
    slots = check_zbench_judges(len(judges))
    documents = {str(d["id"]): d for d in p.item.documents}
    entries: list[dict[str, Any] | None] = []
    for matchup in p.matchups:
        a, b = matchup.shown
        found = [records[p.keys[(a, b, judge.id)]] for judge in judges]
        if any(r.get("score") is None for r in found):
            entries.append(None)
            continue
        first, second = documents[p.ids[a]], documents[p.ids[b]]
        pair = {
            "pair_id": f"{p.item.id}-{first['id']}-{second['id']}",
            "query_id": p.item.id,
            "query": p.item.text,
            "document_a": _pair_document(first),
            "document_b": _pair_document(second),
        }
        scores = {
            name: {"thought": str(found[slot].get("reasoning") or ""), "score": float(found[slot]["score"])}
            for name, slot in zip(zbench_format.SCORE_FIELDS, slots, strict=True)
        }
        entries.append({"pair": pair, **scores})
    return entries


def check_zbench_judges(count: int, flag: str = "zbench pairs") -> tuple[int, int, int]:
    """Which judge fills each of zbench's three score fields."""
    if count == 1:
        return (0, 0, 0)
    if count == 3:
        return (0, 1, 2)
    raise AnnotateError(f"{flag}: zbench's pairs file holds three judges' scores: give one judge or three, not {count}")


def _pair_document(document: dict[str, Any]) -> dict[str, Any]:
    metadata = document.get("metadata")
    return {
        "document_id": str(document["id"]),
        "metadata": metadata if isinstance(metadata, dict) else {},
        "content": str(document["content"]),
    }


def _judgement(record: dict[str, Any]) -> Judgement:
    score = record.get("score")
    return Judgement(None if score is None else float(score), invalid_reason=record.get("invalid_reason"))

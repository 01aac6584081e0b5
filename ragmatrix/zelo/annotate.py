"""zELO annotation of a zbench-format dataset, resumable.

For each query, the documents battle in seeded random cycles (the seed is combined with the
query id, so adding or reordering queries leaves each query's pairs alone). Every judge judges
every matchup; each judgement is appended to the pairs file next to the output as soon as it
is made, with the judge's reasoning, so that

- an interrupted run resumes where it stopped, re-judging nothing already recorded (a
  judgement is found again by the md5 of the query, both documents as shown, the judge's
  output fingerprint and the prompt: a changed document is judged anew);
- a person can read why each document ranked where it did.

Several judges are combined per matchup by `vote`, `zbench_vote` or `mean`, as an ensemble is.
Bradley–Terry then gives each document its zELO, written as `score` on each document of the
output, with the unit recorded on the line (`zelo_scale`). Documents beyond `document_limit`
are never judged and are left out of the output (zbench's reader needs a number on every
document, and no number would be honest). The judgements can also be written in zbench's
`ai_scores.json` shape.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmatrix.keys import md5_of
from ragmatrix.stats import bradley_terry
from ragmatrix.store import ends_torn, read_jsonl
from ragmatrix.zelo import battles as zelo
from ragmatrix.zelo import zbench_format
from ragmatrix.zelo.judges import COMBINE_RULES, Combine, Judgement, combine_judgements, judge_for

# Queries whose judgements are in flight at once; the models' own limits bound the requests.
QUERIES_AT_ONCE = 8


class AnnotateError(Exception):
    """A problem to report in one line: the judges cannot be chosen, or a fit failed."""


def pairs_path(output: Path) -> Path:
    """`out.jsonl` -> `out.pairs.jsonl`, beside the output."""
    output = Path(output)
    stem = output.name[: -len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.pairs.jsonl")


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


@dataclass
class Summary:
    queries: int = 0
    judgements: int = 0  # needed in all
    resumed: int = 0  # found in the pairs file
    made: int = 0  # made by this run
    invalid: int = 0
    problems: list[str] = field(default_factory=list)  # unreadable lines of the pairs file
    left_out_documents: int = 0  # beyond the document limit: not judged, not in the output
    # queries whose comparison graph falls apart (invalid judgements), -> components
    split_queries: dict[str, int] = field(default_factory=dict)
    zbench_pairs: int = 0  # pairs written to the ai_scores.json file
    zbench_pairs_skipped: int = 0  # left out of it: a judge gave no valid score

    @property
    def mostly_invalid(self) -> bool:
        """More than half of the judgements are invalid: the zELOs rest on too little."""
        return self.judgements > 0 and 2 * self.invalid > self.judgements


class PairLog:
    """The scored pairs: one JSON object per judgement, appended and flushed as each is made.

    A run killed mid-write leaves at worst a torn last line, which loading skips and reports.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._torn: bool | None = None  # does the file end in a torn line? (checked once)

    def load(self) -> tuple[dict[str, dict[str, Any]], list[str]]:
        rows, problems = read_jsonl(self.path)
        records: dict[str, dict[str, Any]] = {}
        for record in rows:
            if "key" in record:
                records[str(record["key"])] = record
            else:
                problems.append(f"{self.path.name}: a record without a key (ignored)")
        return records, problems

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            if self._torn is None:
                self._torn = ends_torn(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                # after a torn line, start a fresh one so that this record stays readable
                handle.write(("\n" if self._torn else "") + line)
                handle.flush()  # in the file the moment it is made: a kill loses nothing recorded
            self._torn = False


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
class _Planned:
    """One query's plan: its documents, matchups, and the key of every (matchup, judge)."""

    item: zbench_format.QueryDocuments
    ids: list[str]
    texts: list[str]
    matchups: list[zelo.Matchup]
    keys: dict[tuple[int, int, str], str]  # (shown a, shown b, judge id) -> key


def plan(item: zbench_format.QueryDocuments, judges: Sequence[JudgeModel], settings: Settings) -> _Planned:
    ids, texts = item.document_ids, item.contents
    if settings.document_limit is not None:
        ids, texts = ids[: settings.document_limit], texts[: settings.document_limit]
    matchups = zelo.plan_matchups(len(ids), settings.cycles, f"{settings.seed}:{item.id}", settings.both_orders)
    keys = {}
    for matchup in matchups:
        a, b = matchup.shown
        for judge in judges:
            keys[(a, b, judge.id)] = judgement_key(item.text, texts[a], texts[b], judge, settings.instruction, texts)
    return _Planned(item, ids, texts, matchups, keys)


def annotate(
    items: Sequence[zbench_format.QueryDocuments],
    output: Path,
    judges: Sequence[JudgeModel],
    settings: Settings,
    progress: Callable[[int, int], Any] | None = None,
    pairs: Path | None = None,
    zbench_pairs: Path | None = None,
) -> Summary:
    """Judge what the pairs file does not hold yet, then write the annotated dataset (and,
    with `zbench_pairs`, the judgements in zbench's ai_scores.json shape).

    `progress(total, done)` is called once with the work to do and returns a callable that
    is called with 1 after each judgement (a tqdm bar's `update`, say).
    """
    from ragmatrix.models import aio

    log = PairLog(pairs or pairs_path(output))
    records, problems = log.load()
    planned = [plan(item, judges, settings) for item in items]
    summary = Summary(queries=len(items), problems=problems)
    summary.judgements = sum(len(p.keys) for p in planned)
    summary.resumed = sum(1 for p in planned for key in p.keys.values() if key in records)
    tick = progress(summary.judgements, summary.resumed) if progress is not None else None
    for start in range(0, len(planned), QUERIES_AT_ONCE):
        batch = planned[start : start + QUERIES_AT_ONCE]
        aio.run(_judge_batch(batch, judges, settings, records, log, summary, tick))
    annotated = [compose(p, judges, settings, records, summary) for p in planned]
    zbench_format.write(output, annotated)
    summary.invalid = sum(1 for p in planned for key in p.keys.values() if not records[key].get("valid"))
    summary.left_out_documents = sum(len(p.item.document_ids) - len(p.ids) for p in planned)
    if zbench_pairs is not None:
        scored = [entry for p in planned for entry in zbench_scored_pairs(p, judges, records)]
        summary.zbench_pairs = sum(1 for entry in scored if entry is not None)
        summary.zbench_pairs_skipped = len(scored) - summary.zbench_pairs
        zbench_format.write_scored_pairs(zbench_pairs, [entry for entry in scored if entry is not None])
    return summary


async def _judge_batch(
    batch: Sequence[_Planned],
    judges: Sequence[JudgeModel],
    settings: Settings,
    records: dict[str, dict[str, Any]],
    log: PairLog,
    summary: Summary,
    tick: Callable[[int], Any] | None,
) -> None:
    async def one(p: _Planned, case_judge: Any, judge: JudgeModel, a: int, b: int, key: str) -> None:
        judgement: Judgement = await case_judge.judge(a, b)
        record = {
            "key": key,
            "query_id": p.item.id,
            "a": p.ids[a],
            "b": p.ids[b],
            "judge": judge.id,
            "score": judgement.score,
            "valid": judgement.valid,
            "reasoning": judgement.reasoning,
            "invalid_reason": judgement.invalid_reason,
            "answer": judgement.answer,
            "calls": judgement.calls,
        }
        log.append(record)
        records[key] = record
        summary.made += 1
        if tick is not None:
            tick(1)

    try:
        async with asyncio.TaskGroup() as group:
            for p in batch:
                for judge in judges:
                    todo = {
                        (a, b): key
                        for (a, b, judge_id), key in p.keys.items()
                        if judge_id == judge.id and key not in records
                    }
                    if not todo:
                        continue  # a similarity judge would embed for nothing
                    case_judge = judge_for(judge.model, p.item.text, p.texts, settings.instruction)
                    for (a, b), key in todo.items():
                        group.create_task(one(p, case_judge, judge, a, b, key))
    except BaseExceptionGroup as failed:
        raise zelo.first_error(failed) from None


def compose(
    p: _Planned,
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
    p: _Planned, judges: Sequence[JudgeModel], records: dict[str, Any]
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


def battles_of(pairs: Path, query_id: str) -> list[tuple[str, str, float]]:
    """Every valid judgement recorded for a query, as (a, b, score) with a and b as shown
    (score > 0: b is more relevant), for every judge."""
    records, _ = PairLog(pairs).load()
    return [
        (str(r["a"]), str(r["b"]), float(r["score"]))
        for r in records.values()
        if str(r.get("query_id")) == query_id and r.get("valid") and r.get("score") is not None
    ]


def load_judges(
    models_file: Path, wanted: Sequence[str], registry: Any, combine: Combine | None, flag: str = "--judges"
) -> tuple[list[JudgeModel], Combine]:
    """The judges named (model ids of the models file; an ensemble gives its members) and the
    rule that combines them: the one asked for, else a lone ensemble's own, else vote. Problems
    are AnnotateError lines naming `flag`."""
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
    from ragmatrix.models.providers.ensemble import EnsembleSpec

    if not wanted:
        raise AnnotateError(f"{flag} names no model")
    try:
        specs = load_models(models_file)
    except ModelsFileError as error:
        raise AnnotateError(f"{models_file}: {str(error).split(': ', 1)[-1]}") from None
    known = {s.id for s in specs}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise AnnotateError(f"unknown model '{unknown[0]}' in {flag} ({models_file} has: {', '.join(sorted(known))})")
    chosen = select_models(specs, list(wanted))
    for model_id, reason in chosen.left_out.items():
        raise AnnotateError(f"{flag}: judge {model_id} is not available: {reason}")
    by_id = {spec.id: spec for spec in chosen.available}
    judges: dict[str, JudgeModel] = {}
    rules: list[Combine] = []
    try:
        for model_id in wanted:
            spec = by_id[model_id]
            if isinstance(spec, EnsembleSpec):
                rules.append(spec.combine)
            for member in spec.members or [spec]:
                judges[member.id] = JudgeModel(member.id, registry.build(member), member.output_fingerprint())
    except ModelError as error:
        raise AnnotateError(str(error)) from None
    rule: Combine = combine or (rules[0] if len(wanted) == 1 and rules else "vote")
    if rule not in COMBINE_RULES:
        raise AnnotateError(f"unknown combine rule {rule!r} ({', '.join(COMBINE_RULES)})")
    return list(judges.values()), rule

"""An annotation run: judge what the pairs file does not hold yet, a few queries at a time,
then write the annotated dataset."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragmatrix.zelo import battles as zelo
from ragmatrix.zelo import zbench_format
from ragmatrix.zelo.annotation.compose import compose, zbench_scored_pairs
from ragmatrix.zelo.annotation.pair_log import PairLog, pairs_path
from ragmatrix.zelo.annotation.plan import JudgeModel, Planned, Settings, plan
from ragmatrix.zelo.annotation.summary import Summary
from ragmatrix.zelo.judges import Judgement, judge_for

# Queries whose judgements are in flight at once; the models' own limits bound the requests.
QUERIES_AT_ONCE = 8


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
    batch: Sequence[Planned],
    judges: Sequence[JudgeModel],
    settings: Settings,
    records: dict[str, dict[str, Any]],
    log: PairLog,
    summary: Summary,
    tick: Callable[[int], Any] | None,
) -> None:
    async def one(p: Planned, case_judge: Any, judge: JudgeModel, a: int, b: int, key: str) -> None:
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

"""A two-stage system's cost: its first stage's figures plus its reranking's.

A reranker entry with a `first_stage` is ranked as one system, so its cost is both stages'. Each
stage's figures are measured where its work is done, under its own id: the first stage's index
builds and queries under the first stage's (the same work it does alone), the reranking under
the system's. The system's line then shows the figures of its reranking with the latency of one
query through both stages (the first stage's figures taken on the reranking's device where it
has some) (the two stages' query latencies added, p50 to p50 and p95 to p95: a
sum of quantiles, which bounds the p95 of the sum from above) and the memory both added; each
stage's own figures stay beside them (`ModelCost.stages`, leaderboard.json's `stages`). Texts
per second of such a line are the documents its reranker scores per second.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ragmatrix.cost.figures import DeviceFigures, FamilyCosts, Stage, device_figures
from ragmatrix.cost.record import CostRecord

if TYPE_CHECKING:
    from ragmatrix.models.spec import ModelSpec

BOTH_STAGES = "query, both stages"


def first_stage_of(spec: ModelSpec | None) -> tuple[str, int] | None:
    """The id of a two-stage system's first stage and its depth; None for any other model."""
    first = getattr(spec, "first_stage", None)
    return (str(first), int(getattr(spec, "top_n", 0))) if first else None


def compose(costs: FamilyCosts, records: Sequence[CostRecord], specs: Mapping[str, ModelSpec]) -> None:
    """Give each two-stage system of the family's table its stages and its figures of both."""
    for model, cost in costs.models.items():
        found = first_stage_of(specs.get(model))
        if found is None:
            continue
        first, top_n = found
        reranking = cost.main
        # The first stage's figures on the reranking's device where it has some: a latency added
        # across two machines would describe neither.
        here = reranking.device if reranking is not None else None
        measured = sorted(
            (device_figures(r) for r in records if r.family == costs.family and r.model == first),
            key=lambda figures: (figures.device != here, -figures.work, figures.device),
        )
        first_figures = measured[0] if measured else None
        cost.stages = [Stage("first stage", first, None, first_figures), Stage("reranker", model, top_n, reranking)]
        if reranking is not None:
            cost.devices = [both(first_figures, reranking), *cost.devices[1:]]


def both(first: DeviceFigures | None, reranking: DeviceFigures) -> DeviceFigures:
    """The reranking's figures with the latency of a query through both stages (None where
    either stage's is unknown), the memory both stages' work added, and the higher load average
    either was measured under."""
    latency = None
    if first is not None and first.latency_ms is not None and reranking.latency_ms is not None:
        latency = (
            round(first.latency_ms[0] + reranking.latency_ms[0], 2),
            round(first.latency_ms[1] + reranking.latency_ms[1], 2),
        )
    stages = [f for f in (first, reranking) if f is not None]
    added = [f.memory_added_mb for f in stages if f.memory_added_mb is not None]
    loads = [f.load_average for f in stages if f.load_average is not None]
    return dataclasses.replace(
        reranking,
        latency_ms=latency,
        latency_of=BOTH_STAGES if latency is not None else None,
        memory_added_mb=round(sum(added), 1) if added else None,
        load_average=max(loads) if loads else None,
    )

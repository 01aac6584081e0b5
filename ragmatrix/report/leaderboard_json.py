"""`leaderboard.json`: every family's models with their scores and cost figures, for programs.

The schema is the pydantic models below (`LeaderboardFile`), documented in docs/report.md; it is
an interface others read, so a change to it bumps `VERSION`. A figure that does not apply to a
model, or was never measured, is null, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict

from ragmatrix.cost.figures import DeviceFigures, FamilyCosts, ModelCost
from ragmatrix.cost.price import SearchPrice
from ragmatrix.foundations.data_model import DataModel
from ragmatrix.seam.tables import Tables

FILE_NAME = "leaderboard.json"
# 2: memory_added_mb (what the model's work added) for peak_memory_mb (the process's peak),
# gpu_peak_mb, process_peak_mb (older records), the load average, and how the tokens were priced;
# a two-stage system's stages; a price per thousand searches; `server`, what a remote device's
# server told of itself.
VERSION = 2


class _Strict(DataModel):
    model_config = ConfigDict(extra="forbid")


class Latency(_Strict):
    p50: float
    p95: float


class Tokens(_Strict):
    input: int
    output: int


class PriceEntry(_Strict):
    input_per_million: float | None  # tokens (LLMs, rerankers billed by tokens)
    output_per_million: float | None
    per_thousand_searches: float | None  # a rerank API billed by searches
    source: str  # where the price came from: "models.yaml" or "litellm cost map"


class Measured(_Strict):
    first: str | None
    last: str | None


class Cost(_Strict):
    """One model's cost figures on one device, in one family."""

    device: str | None  # "cpu: <CPU model>", "cuda: <GPU name>", "mps", "remote"; null: nothing measured
    embeddings_per_s: float | None  # texts the model itself encoded per second (embedders, retrievers)
    memory_added_mb: float | None  # what the model's work added to the process's resident memory (local)
    latency_ms: Latency | None  # see latency_of
    tokens: Tokens | None  # LLMs: tokens of the rows that count, as the servers reported them
    usd: float | None  # tokens x price; null without a price
    latency_of: str | None  # "query": one query embedded alone; "request": send to full answer
    gpu_peak_mb: float | None  # CUDA: the peak GPU memory torch's allocator held while the model worked
    model_size_mb: float | None  # the model's files on disk
    parameters: int | None
    tokens_counted: bool  # some calls' tokens were counted here: their server reported none
    price: PriceEntry | None
    pricing: str | None  # "as measured", "read now" (records that keep no price), "re-priced"
    measured: Measured | None  # when the figures of this device were measured (UTC)
    load_average: float | None  # the highest 1-minute load average while they were measured
    cpus: int | None
    busy: bool  # measured while the load average exceeded the CPUs: speeds and latencies read slow
    process_peak_mb: float | None  # older records only: the process's peak memory, not the model's
    note: str | None
    # A model on a server: what the server told of itself ("server": host:port, "model": the id
    # it serves, and from Xinference "engine", "worker", "gpus", "memory"); null for a local model.
    server: dict[str, str] | None


class StageEntry(_Strict):
    """One stage of a two-stage system, with the figures measured under its own id."""

    role: str  # "first stage" or "reranker"
    model: str
    top_n: int | None  # the reranker's depth
    cost: Cost


class ModelEntry(_Strict):
    model: str
    rank: int | None  # None: the family is not ranked (see `unranked`), or the model has no score
    shares_rank: bool  # not significantly different from a model listed above it (the `≈` mark)
    partial: str | None  # "partial (k of n cases)": ran fewer cases or variants than the others
    mean: float | None
    ci: tuple[float, float] | None
    cases: int
    items: int
    errors: int
    invalid: int
    cost: Cost  # on the device with the most measured work (a two-stage system: both stages)
    devices: list[Cost] | None  # every device, when the model was measured on several
    stages: list[StageEntry] | None  # a two-stage system: its first stage and its reranking


class FamilyEntry(_Strict):
    metric: str
    scale: str
    higher_is_better: bool
    cases: int
    items: int
    devices_differ: bool  # the models' speeds were measured on different local devices
    unranked: str | None  # why the family has no ranks (too few cases to tell models apart)
    models: list[ModelEntry]


class LeaderboardFile(_Strict):
    version: int
    results: str
    families: dict[str, FamilyEntry]


def _cost(cost: ModelCost, figures: DeviceFigures | None) -> Cost:
    price = None
    if isinstance(cost.price, SearchPrice):
        price = PriceEntry(
            input_per_million=None,
            output_per_million=None,
            per_thousand_searches=cost.price.per_thousand_searches,
            source=cost.price_source,
        )
    elif cost.price is not None:
        price = PriceEntry(
            input_per_million=cost.price.input_per_million,
            output_per_million=cost.price.output_per_million,
            per_thousand_searches=None,
            source=cost.price_source,
        )
    f = figures
    return Cost(
        device=f.device if f else None,
        embeddings_per_s=f.embeddings_per_s if f else None,
        memory_added_mb=f.memory_added_mb if f else None,
        latency_ms=Latency(p50=f.latency_ms[0], p95=f.latency_ms[1]) if f and f.latency_ms else None,
        tokens=Tokens(input=cost.tokens[0], output=cost.tokens[1]) if cost.tokens else None,
        usd=cost.usd,
        latency_of=f.latency_of if f else None,
        gpu_peak_mb=f.gpu_peak_mb if f else None,
        model_size_mb=f.model_size_mb if f else None,
        parameters=f.parameters if f else None,
        tokens_counted=cost.tokens_counted > 0,
        price=price,
        pricing=cost.pricing,
        measured=Measured(first=f.first_measured, last=f.last_measured) if f else None,
        load_average=f.load_average if f else None,
        cpus=f.cpus if f else None,
        busy=f.busy if f else False,
        process_peak_mb=f.process_peak_mb if f else None,
        note=(f.note if f else None) or (cost.note if figures is cost.main else None),
        server=(f.server or None) if f else None,
    )


def build(tables: Tables, costs: Mapping[str, FamilyCosts], results: str) -> LeaderboardFile:
    families: dict[str, FamilyEntry] = {}
    for table in tables.families:
        family_costs = costs.get(table.family) or FamilyCosts(table.family)
        models = []
        for line in table.lines:
            cost = family_costs.of(line.model)
            ci = (line.low, line.high) if line.low is not None and line.high is not None else None
            models.append(
                ModelEntry(
                    model=line.model,
                    rank=line.rank,
                    shares_rank=line.same_as_above,
                    partial=line.coverage or None,
                    mean=line.mean,
                    ci=ci,
                    cases=line.cases,
                    items=line.items,
                    errors=line.errors,
                    invalid=line.invalid,
                    cost=_cost(cost, cost.main),
                    devices=[_cost(cost, figures) for figures in cost.devices] if len(cost.devices) > 1 else None,
                    stages=[
                        StageEntry(role=s.role, model=s.model, top_n=s.top_n, cost=_cost(ModelCost(s.model), s.figures))
                        for s in cost.stages
                    ]
                    or None,
                )
            )
        families[table.family] = FamilyEntry(
            metric=table.headline.metric,
            scale=table.headline.scale,
            higher_is_better=table.headline.higher_is_better,
            cases=table.cases,
            items=len(table.rows),
            devices_differ=len(family_costs.devices) > 1,
            unranked=table.unranked or None,
            models=models,
        )
    return LeaderboardFile(version=VERSION, results=results, families=families)


def to_text(board: LeaderboardFile) -> str:
    import json

    data: dict[str, Any] = board.model_dump(mode="json")
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False) + "\n"

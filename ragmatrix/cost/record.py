"""One cost record: what a model's work cost on one device, for one family.

Records are stored in `<results>/costs/<family>.jsonl` (see `ragmatrix.cost.store`). During a
run each process appends the figures it measured as a delta; the controller then combines the
records of one (model, device) into one line. Combining is by counts, so it is exact and in
any order: texts, seconds, requests, tokens and cache hits add up, histogram counts add up,
peaks take the larger, the measurement dates widen, and the ids of the sessions that measured
add to the set.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragmatrix.cost.histogram import LatencyHistogram

COST_VERSION = 1


class VariantWork(BaseModel):
    """Texts a model encoded, and its seconds, for one variant (a chunking) of a family."""

    model_config = ConfigDict(extra="ignore")

    texts: int = 0
    encode_s: float = 0.0


class CostRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: int = COST_VERSION
    family: str
    model: str
    device: str  # "cpu: <CPU model>", "cuda: <GPU name>", "mps" or "remote"
    # Embedders and retrievers: texts the model itself encoded (indexed) and its seconds doing
    # it; cache reads are counted apart and never timed.
    texts: int = 0
    encode_s: float = 0.0
    cache_hits: int = 0
    variants: dict[str, VariantWork] = Field(default_factory=dict)
    query_ms: dict[str, Any] = Field(default_factory=dict)  # a LatencyHistogram: one query alone
    # The highest 1-minute load average of the machine while those queries were timed: a lone
    # query's latency on a busy machine measures the contention as much as the model.
    query_load_average: float | None = None
    # LLMs (and embedders over HTTP): requests answered, from send to the full answer of the
    # successful attempt, and the tokens the server reported for them.
    requests: int = 0
    request_ms: dict[str, Any] = Field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    # The process's peak resident memory while the model worked (local devices only), and on
    # CUDA the peak GPU memory torch allocated.
    peak_rss_mb: float | None = None
    peak_gpu_mb: float | None = None
    model_mb: float | None = None  # the model's files on disk
    parameters: int | None = None
    first_measured: str | None = None
    last_measured: str | None = None
    sessions: list[str] = Field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.family, self.model, self.device)

    @property
    def queries(self) -> LatencyHistogram:
        return LatencyHistogram.from_json(self.query_ms)

    @property
    def request_latencies(self) -> LatencyHistogram:
        return LatencyHistogram.from_json(self.request_ms)

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_none=True)
        for name in ("variants", "query_ms", "request_ms", "sessions"):
            if not data.get(name) or (name.endswith("_ms") and not data[name].get("counts")):
                data.pop(name, None)
        return data


def combine(a: CostRecord, b: CostRecord) -> CostRecord:
    """The record of both measurements (same family, model and device)."""
    if a.key != b.key:
        raise ValueError(f"cannot combine the records of {a.key} and {b.key}")
    variants = {name: VariantWork(texts=w.texts, encode_s=w.encode_s) for name, w in a.variants.items()}
    for name, work in b.variants.items():
        kept = variants.setdefault(name, VariantWork())
        kept.texts += work.texts
        kept.encode_s += work.encode_s
    return CostRecord(
        family=a.family,
        model=a.model,
        device=a.device,
        texts=a.texts + b.texts,
        encode_s=round(a.encode_s + b.encode_s, 6),
        cache_hits=a.cache_hits + b.cache_hits,
        variants={
            name: work.model_copy(update={"encode_s": round(work.encode_s, 6)}) for name, work in variants.items()
        },
        query_ms=a.queries.merge(b.queries).to_json(),
        query_load_average=_larger(a.query_load_average, b.query_load_average),
        requests=a.requests + b.requests,
        request_ms=a.request_latencies.merge(b.request_latencies).to_json(),
        tokens_in=a.tokens_in + b.tokens_in,
        tokens_out=a.tokens_out + b.tokens_out,
        peak_rss_mb=_larger(a.peak_rss_mb, b.peak_rss_mb),
        peak_gpu_mb=_larger(a.peak_gpu_mb, b.peak_gpu_mb),
        model_mb=_larger(a.model_mb, b.model_mb),
        parameters=_larger(a.parameters, b.parameters),
        first_measured=min(_dates(a.first_measured, b.first_measured), default=None),
        last_measured=max(_dates(a.last_measured, b.last_measured), default=None),
        sessions=sorted(set(a.sessions) | set(b.sessions)),
    )


def combine_all(records: list[CostRecord]) -> list[CostRecord]:
    """One record per (family, model, device), sorted."""
    combined: dict[tuple[str, str, str], CostRecord] = {}
    for record in records:
        kept = combined.get(record.key)
        combined[record.key] = record if kept is None else combine(kept, record)
    return [combined[key] for key in sorted(combined)]


def _larger(a: Any, b: Any) -> Any:
    present = [value for value in (a, b) if value is not None]
    return max(present) if present else None


def _dates(*values: str | None) -> list[str]:
    return [value for value in values if value]

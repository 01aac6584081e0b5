"""One cost record: what a model's work cost on one device, for one family.

Records are stored in `<results>/costs/<family>.jsonl` (see `ragmatrix.cost.store`). During a
run each process appends the figures it measured as a delta; the controller then combines the
records of one (model, device) into one line. Combining is by counts, so it is exact and in
any order: texts, seconds, requests, tokens and cache hits add up, histogram counts add up,
peaks and load averages take the larger, the measurement dates widen, the ids of the sessions
that measured add to the set, and the price is the latest measurement's (marked when the
measurements were priced differently). What a server told of itself (`server`) is kept from
the latest measurement.

Version 2 records what the model's work added to the process's memory (`memory_added_mb`), the
load average while it was measured and the price its tokens were priced at. A version 1 record
holds only the process's peak memory (`peak_rss_mb`), which counts whatever else the process
held (another model's weights): it is read as it is, kept as it is (a compact file of them is
never rewritten), and never shown as the model's own memory; it has no load average and no
price, which the report then reads from models.yaml as it is now and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ConfigDict, Field

from ragmatrix.cost.histogram import LatencyHistogram
from ragmatrix.cost.price import AnyPrice, Price
from ragmatrix.foundations.data_model import DataModel, empty_list

COST_VERSION = 2


class VariantWork(DataModel):
    """Texts a model encoded, and its seconds, for one variant (a chunking) of a family."""

    model_config = ConfigDict(extra="ignore")

    texts: int = 0
    encode_s: float = 0.0


class CostRecord(DataModel):
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
    # LLMs (and embedders over HTTP): requests answered, from send to the full answer of the
    # successful attempt, and the tokens the server reported for them.
    requests: int = 0
    request_ms: dict[str, Any] = Field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    # What the model's work added to the process's resident memory at most: its growth while
    # the model worked (local devices only); and on CUDA the peak GPU memory torch's allocator held.
    memory_added_mb: float | None = None
    peak_gpu_mb: float | None = None
    # Version 1 only: the process's peak resident memory while the model worked (not its own).
    peak_rss_mb: float | None = None
    model_mb: float | None = None  # the model's files on disk
    parameters: int | None = None
    first_measured: str | None = None
    last_measured: str | None = None
    sessions: list[str] = Field(default_factory=empty_list)
    # A model on a server: what the server told of itself ("server": host:port, "model": the id
    # it serves, "engine", "worker", "gpus", "memory"), as `ragmatrix.cost.device.Device.about`.
    server: dict[str, str] = Field(default_factory=dict)
    # The highest 1-minute load average seen while measuring, and the machine's CPUs.
    load_average: float | None = None
    cpus: int | None = None
    # Requests (LLMs): the price their tokens were priced at when measured, where it came from
    # ("models.yaml", "litellm cost map", "none"), and whether measurements combined here were
    # priced differently (the price is then the latest's).
    price: AnyPrice | None = None  # a rerank API's: per thousand searches
    price_source: str | None = None
    prices_differ: bool = False

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
        if not self.prices_differ:
            data.pop("prices_differ")
        for name in ("variants", "query_ms", "request_ms", "sessions", "server"):
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
    price, price_source, prices_differ = latest_price([a, b])
    busiest = max((a, b), key=lambda r: _load_per_cpu(r.load_average, r.cpus))
    return CostRecord(
        version=max(a.version, b.version),
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
        requests=a.requests + b.requests,
        request_ms=a.request_latencies.merge(b.request_latencies).to_json(),
        tokens_in=a.tokens_in + b.tokens_in,
        tokens_out=a.tokens_out + b.tokens_out,
        memory_added_mb=_larger(a.memory_added_mb, b.memory_added_mb),
        peak_gpu_mb=_larger(a.peak_gpu_mb, b.peak_gpu_mb),
        peak_rss_mb=_larger(a.peak_rss_mb, b.peak_rss_mb),
        model_mb=_larger(a.model_mb, b.model_mb),
        parameters=_larger(a.parameters, b.parameters),
        first_measured=min(_dates(a.first_measured, b.first_measured), default=None),
        last_measured=max(_dates(a.last_measured, b.last_measured), default=None),
        sessions=sorted(set(a.sessions) | set(b.sessions)),
        load_average=busiest.load_average,
        cpus=busiest.cpus,
        price=price,
        price_source=price_source,
        prices_differ=prices_differ,
        server=_newer(a, b).server or _older(a, b).server,
    )


def latest_price(records: Iterable[CostRecord]) -> tuple[AnyPrice | None, str | None, bool]:
    """The price of the latest measurement that was priced, where it came from, and whether the
    measurements were priced differently; (None, None, False) where none was priced."""
    priced = [r for r in records if r.price_source is not None]
    if not priced:
        return None, None, False
    latest = max(priced, key=lambda r: r.last_measured or "")
    differ = any(r.prices_differ for r in priced) or len({_priced_as(r) for r in priced}) > 1
    return latest.price, latest.price_source, differ


def _priced_as(record: CostRecord) -> tuple[float | None, float | None, str | None]:
    if record.price is None:
        return (None, None, record.price_source)
    if not isinstance(record.price, Price):  # per thousand searches
        return (record.price.per_thousand_searches, None, record.price_source)
    return (record.price.input_per_million, record.price.output_per_million, record.price_source)


def _load_per_cpu(load: float | None, cpus: int | None) -> float:
    return -1.0 if load is None else load / (cpus or 1)


def combine_all(records: list[CostRecord]) -> list[CostRecord]:
    """One record per (family, model, device), sorted."""
    combined: dict[tuple[str, str, str], CostRecord] = {}
    for record in records:
        kept = combined.get(record.key)
        combined[record.key] = record if kept is None else combine(kept, record)
    return [combined[key] for key in sorted(combined)]


def _newer(a: CostRecord, b: CostRecord) -> CostRecord:
    return b if (b.last_measured or "") >= (a.last_measured or "") else a


def _older(a: CostRecord, b: CostRecord) -> CostRecord:
    return a if _newer(a, b) is b else b


def _larger(a: Any, b: Any) -> Any:
    present = [value for value in (a, b) if value is not None]
    return max(present) if present else None


def _dates(*values: str | None) -> list[str]:
    return [value for value in values if value]

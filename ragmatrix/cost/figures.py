"""A model's cost figures in one family, as data: what `ragmatrix.report.cost` computes from the
cost records and the rows, and what the terminal, the report and a family's cost sections read.

A figure that does not apply, or was never measured, is None: never a 0 that could pass for a
measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragmatrix.cost.device import hardware, is_local
from ragmatrix.cost.load import is_busy
from ragmatrix.cost.price import AnyPrice
from ragmatrix.cost.record import CostRecord

ALL_FROM_CACHE = "every text came from the embedding cache: no speed was measured"
NOT_MEASURED = (
    "no cost measured: its work predates cost records, or came from the caches "
    "(pytest benchmark --run-all --no-response-cache measures it)"
)


@dataclass(frozen=True)
class DeviceFigures:
    """What one model's work cost on one device, in one family."""

    device: str
    embeddings_per_s: float | None  # texts the model encoded per second of its own encode time
    memory_added_mb: float | None  # what the model's work added to the process's resident memory
    gpu_peak_mb: float | None  # CUDA: the peak GPU memory torch's allocator held while it worked
    latency_ms: tuple[float, float] | None  # p50, p95
    latency_of: str | None  # "query": one query alone; "request": one request, send to answer
    model_size_mb: float | None
    parameters: int | None
    texts: int
    requests: int
    first_measured: str | None
    last_measured: str | None
    note: str | None = None
    server: dict[str, str] = field(default_factory=dict)  # a model on a server: what it told of itself
    process_peak_mb: float | None = None  # older records: the process's peak, not the model's own
    load_average: float | None = None  # the highest 1-minute load average while measured
    cpus: int | None = None

    @property
    def work(self) -> int:
        return self.texts + self.requests

    @property
    def busy(self) -> bool:
        """Measured while the machine's load average exceeded its CPUs: speeds and latencies
        read the contention as much as the model."""
        return is_busy(self.load_average, self.cpus)


@dataclass(frozen=True)
class Stage:
    """One stage of a two-stage system, with its own figures (see `ragmatrix.report.stages`)."""

    role: str  # "first stage" or "reranker"
    model: str  # the model id its figures are kept under
    top_n: int | None  # the reranker's depth
    figures: DeviceFigures | None


@dataclass
class ModelCost:
    model: str
    devices: list[DeviceFigures] = field(default_factory=list)  # the most measured work first
    stages: list[Stage] = field(default_factory=list)  # a two-stage system's: its first stage, its reranking
    tokens: tuple[int, int] | None = None  # input, output; None for a model that reads no tokens
    tokens_counted: int = 0  # calls whose tokens were counted here, the server having reported none
    usd: float | None = None
    price: AnyPrice | None = None
    price_source: str = "unknown"  # where the price came from: "models.yaml", "litellm cost map", ...
    # How the tokens were priced: "as measured" (the price the cost records keep), "read now"
    # (records that keep none: models.yaml as it is now), "re-priced" (a models file given to
    # the report on purpose); None when nothing was priced.
    pricing: str | None = None
    prices_differ: bool = False  # the runs measured were priced differently: the latest price is used
    note: str | None = None

    @property
    def main(self) -> DeviceFigures | None:
        return self.devices[0] if self.devices else None


@dataclass
class FamilyCosts:
    family: str
    models: dict[str, ModelCost] = field(default_factory=dict)
    # (model, variant) -> texts per second on the model's main device (code retrieval: chunking)
    by_variant: dict[tuple[str, str], float] = field(default_factory=dict)

    def of(self, model: str) -> ModelCost:
        return self.models.get(model) or ModelCost(model, note=NOT_MEASURED)

    @property
    def devices(self) -> list[str]:
        """The main devices of the table's local models: speeds compare only within one (a
        backend's runtime on the same CPU compares: that is what it is for)."""
        found = {
            hardware(cost.main.device) for cost in self.models.values() if cost.main and is_local(cost.main.device)
        }
        return sorted(found)


def device_figures(record: CostRecord) -> DeviceFigures:
    """One record's figures: its speed, latency quantiles, memory and size."""
    speed = record.texts / record.encode_s if record.texts and record.encode_s > 0 else None
    latency: tuple[float, float] | None = None
    latency_of: str | None = None
    for histogram, what in ((record.queries, "query"), (record.request_latencies, "request")):
        p50, p95 = histogram.quantile(0.5), histogram.quantile(0.95)
        if p50 is not None and p95 is not None:
            latency, latency_of = (round(p50, 2), round(p95, 2)), what
            break
    note = ALL_FROM_CACHE if not record.texts and record.cache_hits and not record.requests else None
    return DeviceFigures(
        device=record.device,
        embeddings_per_s=None if speed is None else round(speed, 2),
        memory_added_mb=record.memory_added_mb,
        gpu_peak_mb=record.peak_gpu_mb,
        latency_ms=latency,
        latency_of=latency_of,
        model_size_mb=record.model_mb,
        parameters=record.parameters,
        texts=record.texts,
        requests=record.requests,
        first_measured=record.first_measured,
        last_measured=record.last_measured,
        note=note,
        server=dict(record.server),
        process_peak_mb=record.peak_rss_mb if record.memory_added_mb is None else None,
        load_average=record.load_average,
        cpus=record.cpus,
    )

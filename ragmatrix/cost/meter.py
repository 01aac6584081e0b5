"""The session's cost meter, and how a model's work reaches it.

Two context variables carry the attribution, as `current_usage` carries an item's usage:

- `current_meter`: the session's `Meter`, set by the plugin for a benchmark session (nothing is
  measured outside one: the command line, a library call);
- `current_work`: the family (and variant) the work is for, set by the runner around each item
  and by the scheduler around what it sends and embeds ahead of the items.

Models call the functions below where they work: `encoding` around their own encode calls
(never cache reads), `served_from_cache`, `time_queries`, `query_latency` and
`timed_request`. Each adds to the meter's record of (family, model, device), with the load
average of the moment (`ragmatrix.cost.load`). The meter keeps the figures since its last
flush as deltas, and appends them to the results folder at most every `FLUSH_EVERY_S` seconds
(after an item) and at session end; a record of requests carries the price its tokens are
priced at, as the session's `prices` say.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ragmatrix.cost import device as devices
from ragmatrix.cost.device import Device
from ragmatrix.cost.histogram import LatencyHistogram
from ragmatrix.cost.load import load_now
from ragmatrix.cost.memory import PeakMemory
from ragmatrix.cost.price import NO_PRICE, AnyPrice
from ragmatrix.cost.record import CostRecord, VariantWork

T = TypeVar("T")
FLUSH_EVERY_S = 5.0
# Queries timed alone, besides the real work, per (family, model, device) and process: at least
# one, at most QUERY_SAMPLES, and no more once they have taken QUERY_SHARE of the time the model
# spent on its real work for the family (its own encode calls), so that timing one query costs a
# cold run a few per cent at most (32 lone queries after every batch had cost a third of one).
# A query a retriever scores for real (`query_latency`) is timed as it is run, at no extra cost.
QUERY_SAMPLES = 8
QUERY_SHARE = 0.05

Key = tuple[str, str, str]  # (family, model id, device)
# A model id's price and where it comes from ("models.yaml", "litellm cost map", or another word
# for none), as the session's models.yaml says when the work is measured.
Prices = Callable[[str], tuple[AnyPrice | None, str]]


@dataclass(frozen=True)
class Work:
    family: str
    variant: str = ""


current_work: ContextVar[Work | None] = ContextVar("current_work", default=None)


@dataclass
class _Delta:
    """What one process measured for one key since the last flush."""

    texts: int = 0
    encode_s: float = 0.0
    cache_hits: int = 0
    variants: dict[str, list[float]] = field(default_factory=dict)  # variant -> [texts, seconds]
    queries: LatencyHistogram = field(default_factory=LatencyHistogram)
    requests: int = 0
    request_ms: LatencyHistogram = field(default_factory=LatencyHistogram)
    tokens_in: int = 0
    tokens_out: int = 0
    memory_added_mb: float | None = None
    peak_gpu_mb: float | None = None
    model_mb: float | None = None
    parameters: int | None = None
    first: str | None = None
    last: str | None = None
    server: dict[str, str] = field(default_factory=dict)  # what a remote device told of itself
    load_average: float | None = None
    cpus: int | None = None

    def touch(self) -> None:
        now, load, self.cpus = _moment()
        self.first = self.first or now
        self.last = now
        self.load_average = _larger(self.load_average, load)

    def record(self, key: Key, session: str, price: tuple[AnyPrice | None, str] | None) -> CostRecord:
        family, model, device = key
        return CostRecord(
            family=family,
            model=model,
            device=device,
            texts=self.texts,
            encode_s=round(self.encode_s, 6),
            cache_hits=self.cache_hits,
            variants={
                name: VariantWork(texts=int(texts), encode_s=round(seconds, 6))
                for name, (texts, seconds) in self.variants.items()
                if name
            },
            query_ms=self.queries.to_json(),
            requests=self.requests,
            request_ms=self.request_ms.to_json(),
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            memory_added_mb=None if self.memory_added_mb is None else round(self.memory_added_mb, 1),
            peak_gpu_mb=None if self.peak_gpu_mb is None else round(self.peak_gpu_mb, 1),
            model_mb=None if self.model_mb is None else round(self.model_mb, 1),
            parameters=self.parameters,
            first_measured=self.first,
            last_measured=self.last,
            sessions=[session],
            server=dict(self.server),
            load_average=self.load_average,
            cpus=self.cpus,
            price=price[0] if price else None,
            price_source=price[1] if price else None,
        )


class Meter:
    """The figures of one process's session, by (family, model, device).

    `directory` is the results folder (records go to its `costs/`); None keeps them in memory
    (`totals`), for a script that reads them itself. `prices` prices a model's requests."""

    def __init__(self, directory: Path | None, prices: Prices | None = None) -> None:
        self.directory = directory
        self.prices = prices
        self.texts_embedded = 0  # texts embedders encoded in this process, counted once encoded
        self.session = uuid.uuid4().hex[:12]
        self.totals: dict[Key, CostRecord] = {}  # everything this process measured, flushed or not
        self._deltas: dict[Key, _Delta] = {}
        self._query_samples: Counter[Key] = Counter()
        self._query_ms_alone: dict[Key, float] = {}  # time spent on queries timed besides the work
        self._encode_s: dict[Key, float] = {}  # the real work's seconds, in this process
        self._sized: set[Key] = set()
        self._warm: set[str] = set()  # models that encoded something for real in this process
        self._lock = threading.RLock()
        self._flushed_at = time.monotonic()
        self._unwritten: list[CostRecord] = []  # records a failed write kept for the next flush

    def _delta(self, key: Key) -> _Delta:
        delta = self._deltas.get(key)
        if delta is None:
            delta = self._deltas[key] = _Delta()
        return delta

    # -- what models report ------------------------------------------------------------------

    def encoded(
        self, work: Work, model: str, device: str, texts: int, seconds: float, peak: PeakMemory, embedded: bool = False
    ) -> None:
        """`embedded`: the texts were embedded (an embedder's), not indexed (a lexical retriever's)."""
        with self._lock:
            delta = self._delta((work.family, model, device))
            delta.texts += texts
            delta.encode_s += seconds
            key = (work.family, model, device)
            self._encode_s[key] = self._encode_s.get(key, 0.0) + seconds
            variant = delta.variants.setdefault(work.variant, [0, 0.0])
            variant[0] += texts
            variant[1] += seconds
            self.texts_embedded += texts if embedded else 0
            delta.memory_added_mb = _larger(delta.memory_added_mb, peak.added_mb if devices.is_local(device) else None)
            delta.peak_gpu_mb = _larger(delta.peak_gpu_mb, peak.gpu_mb)
            delta.touch()
            self._warm.add(model)

    def sized(self, work: Work, model: str, device: str, size: tuple[float | None, int | None]) -> None:
        with self._lock:
            delta = self._delta((work.family, model, device))
            delta.model_mb, delta.parameters = size

    def needs_size(self, work: Work, model: str, device: str) -> bool:
        key = (work.family, model, device)
        with self._lock:
            if key in self._sized:
                return False
            self._sized.add(key)
            return True

    def from_cache(self, work: Work, model: str, device: str, texts: int) -> None:
        with self._lock:
            self._delta((work.family, model, device)).cache_hits += texts

    def wants_a_query_timed(self, work: Work, model: str, device: str) -> bool:
        """May one more query be timed alone, besides the real work (see QUERY_SHARE)?"""
        key = (work.family, model, device)
        with self._lock:
            done = self._query_samples[key]
            if done == 0:
                return True
            spent_s = self._query_ms_alone.get(key, 0.0) / 1000.0
            return done < QUERY_SAMPLES and spent_s < QUERY_SHARE * self._encode_s.get(key, 0.0)

    def query(self, work: Work, model: str, device: str, ms: float, alone: bool = False) -> None:
        """One query's latency; `alone`: it was timed besides the real work (`time_queries`)."""
        key = (work.family, model, device)
        with self._lock:
            self._query_samples[key] += 1
            if alone:
                self._query_ms_alone[key] = self._query_ms_alone.get(key, 0.0) + ms
            delta = self._delta(key)
            delta.queries.add(ms)
            delta.touch()

    def request(self, work: Work, model: str, device: str, ms: float | None, tokens: tuple[int, int]) -> None:
        """One request answered and its tokens; `ms` None: its latency does not count (a cold start)."""
        with self._lock:
            delta = self._delta((work.family, model, device))
            delta.requests += 1
            if ms is not None:
                delta.request_ms.add(ms)
            delta.tokens_in += tokens[0]
            delta.tokens_out += tokens[1]
            delta.touch()

    def described(self, work: Work, model: str, device: Device) -> None:
        """Keep what a server told of itself beside the figures of its device."""
        if device.about:
            with self._lock:
                self._delta((work.family, model, device.name)).server = device.details

    def is_warm(self, model: str) -> bool:
        with self._lock:
            return model in self._warm

    # -- keeping them --------------------------------------------------------------------------

    def take(self) -> list[CostRecord]:
        """The records measured since the last call, which are forgotten here (`totals` keeps
        the sum)."""
        from ragmatrix.cost.record import combine

        with self._lock:
            deltas, self._deltas = self._deltas, {}
            self._flushed_at = time.monotonic()
        records = [
            delta.record(key, self.session, self._price(key[1]) if delta.requests else None)
            for key, delta in sorted(deltas.items())
        ]
        for record in records:
            kept = self.totals.get(record.key)
            self.totals[record.key] = record if kept is None else combine(kept, record)
        return records

    def _price(self, model: str) -> tuple[AnyPrice | None, str]:
        price, source = self.prices(model) if self.prices is not None else (None, NO_PRICE)
        return (price, source) if price is not None else (None, NO_PRICE)

    def flush(self, force: bool = False) -> None:
        """Append what was measured since the last flush to `<results>/costs/`, when `force` or
        when the last flush is `FLUSH_EVERY_S` ago: a killed run loses seconds of figures."""
        if not force and time.monotonic() - self._flushed_at < FLUSH_EVERY_S:
            return
        records, self._unwritten = [*self._unwritten, *self.take()], []
        if records and self.directory is not None:
            from ragmatrix.cost.store import CostStore

            try:
                CostStore(self.directory).append(records)
            except OSError:  # a full or read-only disk must not cost the item its row
                self._unwritten = records


current_meter: ContextVar[Meter | None] = ContextVar("current_meter", default=None)


_read_at: tuple[int, tuple[str, float | None, int | None]] = (-1, ("", None, None))


def _moment() -> tuple[str, float | None, int | None]:
    """The time (to the second) and the machine's load, read at most once a second: a run counts
    many requests a second, and neither reading changes faster (the kernel updates its load
    average every 5 seconds)."""
    global _read_at
    second = int(time.monotonic())
    if _read_at[0] != second:
        _read_at = (second, (datetime.now(UTC).isoformat(timespec="seconds"), *load_now()))
    return _read_at[1]


def _larger(a: float | None, b: float | None) -> float | None:
    present = [value for value in (a, b) if value is not None]
    return max(present) if present else None


def _target() -> tuple[Meter, Work] | None:
    meter = current_meter.get()
    work = current_work.get()
    return (meter, work) if meter is not None and work is not None else None


# --- the session and its items (the plugin) -------------------------------------------------------


def start_session(directory: Path | None, prices: Prices | None = None) -> Token[Meter | None]:
    return current_meter.set(Meter(directory, prices))


def end_session(token: Token[Meter | None]) -> None:
    """Append what is left, and stop measuring."""
    meter = current_meter.get()
    try:
        if meter is not None:
            meter.flush(force=True)
    finally:
        current_meter.reset(token)


def begin_item(family: str, variant: str) -> Token[Work | None]:
    return current_work.set(Work(family, variant))


def end_item(token: Token[Work | None]) -> None:
    current_work.reset(token)
    meter = current_meter.get()
    if meter is not None:
        meter.flush()


@contextmanager
def working_on(family: str, variant: str = "") -> Iterator[None]:
    """Attribute the work inside to `family` (the scheduler's, done ahead of the items)."""
    token = current_work.set(Work(family, variant))
    try:
        yield
    finally:
        current_work.reset(token)


# --- what models call ------------------------------------------------------------------------------


class Measured(Protocol):
    """What the meter reads of a model: every model wrapper of `ragmatrix.models` offers it."""

    id: str
    kind: str  # "embedder", "retriever", "reranker", ...: a lexical index is no embedding

    def cost_device(self) -> Device:
        """Where the model works: figures are kept per device, and memory counts only for a model
        in this process."""
        ...

    def prepare_to_measure(self) -> None:
        """Load and warm up the model (or find it on its server), so that its first timed call
        is not its load."""
        ...

    def model_size(self) -> tuple[float | None, int | None]:
        """The model's files on disk (MB) and its parameter count, where it can tell."""
        ...


@contextmanager
def encoding(model: Measured, texts: int) -> Iterator[None]:
    """Around a model's own encode (or index) call of `texts` texts: its seconds and the peak
    memory, outside any load or warm-up (`model.prepare_to_measure()`)."""
    target = _target()
    if target is None:
        yield
        return
    meter, work = target
    model.prepare_to_measure()
    device = model.cost_device()
    if device.local and meter.needs_size(work, model.id, device.name):
        meter.sized(work, model.id, device.name, model.model_size())
    peak = PeakMemory(device.cuda if device.local else None)
    with peak:
        began = time.perf_counter()
        yield
        seconds = time.perf_counter() - began
    meter.encoded(work, model.id, device.name, texts, seconds, peak, embedded=model.kind == "embedder")


def served_from_cache(model: Measured, texts: int) -> None:
    target = _target()
    if target is not None and texts:
        meter, work = target
        meter.from_cache(work, model.id, model.cost_device().name, texts)


def time_queries(model: Measured, texts: list[str], encode: Callable[[list[str]], Any]) -> None:
    """Time a few of `texts` (queries, prefixes applied) embedded one at a time by `encode` (the
    model itself, no cache), once the model has encoded for real in this process: the latency
    of one query, which batching would hide. As few as QUERY_SHARE of the real work allows (at
    least one per family); the record keeps the load average they were measured under. A model
    over HTTP is not asked again: its requests are timed as they are made."""
    target = _target()
    if target is None or not texts:
        return
    meter, work = target
    device = model.cost_device()
    if not device.local or not meter.is_warm(model.id):
        return
    for text in dict.fromkeys(texts):
        if not meter.wants_a_query_timed(work, model.id, device.name):
            break
        began = time.perf_counter()
        encode([text])
        meter.query(work, model.id, device.name, (time.perf_counter() - began) * 1000.0, alone=True)


def query_latency(model: Measured, ms: float) -> None:
    """A query's latency as the model's own work measured it (a retriever scoring one query for
    real): every such query counts, at no extra cost."""
    target = _target()
    if target is None:
        return
    meter, work = target
    meter.query(work, model.id, model.cost_device().name, ms)


async def timed_request(
    model: Measured, request: Awaitable[T], cold: bool = False, usage: Callable[[T], Any] | None = None
) -> T:
    """Await one request attempt and, when it answers, record its latency (from send to the
    full answer) and the tokens `usage(answer)` reports. `cold`: the model's first request in
    this process, which pays for the client's start (imports, connections): its tokens are
    recorded, its latency is not."""
    target = _target()
    began = time.perf_counter()
    answer = await request
    if target is not None:
        meter, work = target
        tokens = usage(answer) if usage is not None else None
        tokens = tokens if isinstance(tokens, dict) else {}
        counts = (int(tokens.get("prompt_tokens") or 0), int(tokens.get("completion_tokens") or 0))
        device = model.cost_device()
        ms = None if cold else (time.perf_counter() - began) * 1000.0
        meter.request(work, model.id, device.name, ms, counts)
        meter.described(work, model.id, device)
    return answer

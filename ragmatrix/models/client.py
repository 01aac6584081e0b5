"""The one place model calls are made robust: concurrency, timeouts, bounded retries, the
breaker and the pace under rate limits.

Every provider call goes through `call()`. It holds the model's semaphore only while a
request is in flight, bounds each attempt with `asyncio.wait_for` (some client libraries
ignore their own async timeout), and retries 429s, 5xx and timeouts with exponential backoff
that honours `Retry-After`. An empty answer is such a transient fault too. Other failures end
at once as a `ModelError`, which the plugin records as an error row, never as a score.

A `Breaker` per model watches the attempts. After K consecutive outages (timeouts, connection
errors, 5xx, empty answers) it opens: calls wait instead of failing, and after a cool-down one
call goes as a probe. An answer closes the breaker and everything waiting goes on; a failed
probe opens it again for twice as long. Only when probes have kept failing for the model's
patience is the model down for the session: every call waiting or yet to come then fails at
once, so a dead server still ends the run quickly while a blip costs seconds.

A `Throttle` per model paces it under rate limits: a 429 halves how many requests may be in
flight, each answer grows it back (additive increase, multiplicative decrease), and a
`Retry-After` holds every request of the model until it has passed.

`Client` holds one model's semaphore, retry policy, breaker and throttle, made from its spec:
every model wrapper of a remote provider (chat, embeddings, reranking) sends through one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ragmatrix.foundations.untrusted import safe_text

T = TypeVar("T")


class CallSettings(Protocol):
    """The fields of a model's spec that its client reads (every `ModelSpec` has them)."""

    concurrency: int
    timeout: float
    retries: int
    breaker_after: int

    @property
    def patience(self) -> float: ...


class ModelError(Exception):
    """A model call that failed for good. Its message often quotes a server's error body: its
    control characters are escaped, for it is printed and stored."""

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(safe_text(message))
        self.attempts = attempts


class EmptyAnswer(Exception):
    """A reply that holds no answer (no choices, null or empty content): a server fault that
    may pass, retried like a 5xx and never cached."""


MODEL_DOWN = "model down after"  # how every error of a model whose breaker gave up begins

FIRST_COOLDOWN = 0.5  # seconds an opened breaker waits before its first probe
MAX_COOLDOWN = 30.0  # the longest wait between two probes (each failed probe doubles it)


class _Waiters:
    """Calls parked until something changes. Futures are made on the running loop at each
    wait, so an object that outlives an event loop (a model across test sessions) never holds
    a primitive bound to a closed one."""

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    async def wait(self, timeout: float | None = None) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures.append(future)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        finally:
            if future in self._futures:
                self._futures.remove(future)

    def wake(self) -> None:
        futures, self._futures = self._futures, []
        for future in futures:
            if not future.done():
                future.set_result(None)


class Breaker:
    """A model's circuit breaker: closed, open (calls wait, one probes after a cool-down) or
    down (given up for the session).

    Any answer closes it and resets the count, and so does a refusal (a 4xx or a 429): the
    server is there, it only says no. `patience`: how long probes may keep failing before the
    model is down (seconds, from the moment the breaker opened).
    """

    def __init__(self, threshold: int, patience: float = 60.0) -> None:
        self.threshold = threshold
        self.patience = patience
        self.failures = 0  # consecutive outages while closed
        self.down: str | None = None  # the message every later call fails with
        self.opened_at: float | None = None  # time.monotonic() when it opened; None while closed
        self.probe_at = 0.0  # when the next probe may go
        self.probing = False  # a probe is in flight
        self.failed_probes = 0
        self.opened = 0  # how often it opened this session
        self._waiters = _Waiters()

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def check(self) -> None:
        if self.down is not None:
            raise ModelError(self.down, attempts=0)

    async def admit(self) -> bool:
        """Wait until a call may send: at once while closed; while open, until this call is
        the probe (True) or another probe's answer closed the breaker. Raises once the model is
        down."""
        while True:
            self.check()
            if self.opened_at is None:
                return False
            now = time.monotonic()
            if not self.probing and now >= self.probe_at:
                self.probing = True
                return True
            await self._waiters.wait(None if self.probing else self.probe_at - now)

    def success(self) -> None:
        """The server answered (or refused): the breaker closes and everything waiting goes."""
        self.failures = 0
        if self.opened_at is not None and self.down is None:
            self.opened_at = None
            self.probing = False
            self.failed_probes = 0
            self._waiters.wake()

    def failure(self, message: str, probe: bool = False) -> None:
        """An attempt ended in an outage. While closed it counts towards the threshold; while
        open only a failed probe matters (the others were sent before it opened)."""
        if self.down is not None:
            return
        now = time.monotonic()
        if self.opened_at is None:
            self.failures += 1
            if self.failures >= self.threshold:
                self.opened_at, self.probe_at = now, now + FIRST_COOLDOWN
                self.opened += 1
            return
        if not probe:
            return
        self.probing = False
        self.failed_probes += 1
        cooldown = min(FIRST_COOLDOWN * 2**self.failed_probes, MAX_COOLDOWN)
        if now + cooldown - self.opened_at > self.patience:
            probes = f"{self.failed_probes} failed probe{'s' if self.failed_probes != 1 else ''}"
            self.down = (
                f"{MODEL_DOWN} {self.failures} failures and {probes} over {now - self.opened_at:.1f} s: "
                f"last error {message}"
            )
        else:
            self.probe_at = now + cooldown
        self._waiters.wake()

    def abandon_probe(self) -> None:
        """The probe ended with neither an answer nor an outage (it was cancelled): let another
        call probe."""
        if self.probing:
            self.probing = False
            self._waiters.wake()


class Throttle:
    """How many of a model's requests may be in flight, and when they may go.

    It starts at the model's concurrency (`ceiling`). A 429 halves the limit (at least 1), once
    per round of requests: a 429 to a request sent before the last cut does not cut again. Each
    answer adds 1/limit, that is about one request per round of answers, back up to the
    ceiling. A `Retry-After` holds every request of the model until that time.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.cuts = 0  # how often a 429 cut the limit; a request remembers the count it was sent at
        self.paused_until = 0.0  # time.monotonic()
        self._waiters = _Waiters()

    async def acquire(self) -> int:
        """Wait for a free place; returns the number of cuts so far, for `rate_limited`."""
        while True:
            pause = self.paused_until - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
                continue
            if self.in_flight < max(1, int(self.limit)):
                self.in_flight += 1
                return self.cuts
            await self._waiters.wait()

    def release(self) -> None:
        self.in_flight -= 1
        self._waiters.wake()

    def answered(self) -> None:
        if self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            self._waiters.wake()

    def rate_limited(self, sent_at_cut: int, retry_after: float | None) -> None:
        if sent_at_cut == self.cuts:
            self.limit = max(1.0, self.limit / 2)
            self.cuts += 1
        if retry_after is not None:
            self.paused_until = max(self.paused_until, time.monotonic() + retry_after)


@dataclass(frozen=True)
class Failure:
    """How a provider classifies one failed attempt."""

    message: str
    retryable: bool
    retry_after: float | None = None
    # Does it say the server is not answering? None: whenever it is retryable.
    outage: bool | None = None

    @property
    def counts_as_outage(self) -> bool:
        return self.retryable if self.outage is None else self.outage

    @property
    def slow_down(self) -> bool:
        """A retryable refusal that is no outage: a rate limit (429)."""
        return self.retryable and not self.counts_as_outage


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3  # attempts after the first
    base_delay: float = 0.5
    max_delay: float = 60.0


def is_retryable_status(status: int | None) -> bool:
    return status is not None and (status == 429 or status == 408 or status >= 500)


def parse_retry_after(value: object) -> float | None:
    """Seconds from a Retry-After header value (only the delta-seconds form)."""
    try:
        seconds = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


async def call(
    send: Callable[[], Awaitable[T]],
    *,
    semaphore: asyncio.Semaphore,
    timeout: float,
    policy: RetryPolicy,
    classify: Callable[[BaseException], Failure],
    breaker: Breaker | None = None,
    throttle: Throttle | None = None,
) -> T:
    """`send()`'s result, attempted under `semaphore` with each attempt bounded by `timeout`,
    retried as `policy` and `classify` say. `breaker` and `throttle` are the model's own (one
    each per model, shared by all its calls); without them the call neither waits for a probe
    nor slows down on 429s."""
    attempts = 0
    retried = 0  # retries used; a failed probe uses none: it tests the server, not this request
    while True:
        probe = await breaker.admit() if breaker is not None else False
        cuts = 0
        try:
            async with semaphore:
                if throttle is not None:
                    cuts = await throttle.acquire()
                try:
                    if breaker is not None and breaker.is_open and not probe:
                        continue  # it opened while this call waited its turn: wait for a probe's answer
                    attempts += 1
                    result = await asyncio.wait_for(send(), timeout)
                finally:
                    if throttle is not None:
                        throttle.release()
        except TimeoutError:
            failure = Failure(f"timed out after {timeout:g} s", retryable=True)
        except EmptyAnswer as error:
            failure = Failure(f"empty answer ({error})", retryable=True)
        except (asyncio.CancelledError, ModelError):
            if probe and breaker is not None:
                breaker.abandon_probe()
            raise
        except Exception as error:  # providers raise many types; classify decides
            failure = classify(error)
        else:
            if breaker is not None:
                breaker.success()
            if throttle is not None:
                throttle.answered()
            return result
        if breaker is not None:
            if failure.counts_as_outage:
                breaker.failure(failure.message, probe=probe)
            else:
                breaker.success()  # the server answered, if only to refuse
        if throttle is not None and failure.slow_down:
            throttle.rate_limited(cuts, failure.retry_after)
        if not (probe and failure.counts_as_outage):
            retried += 1
        if breaker is not None and breaker.down is not None and failure.retryable and retried <= policy.retries:
            raise ModelError(breaker.down, attempts=attempts)
        if not failure.retryable or retried > policy.retries:
            plural = "s" if attempts > 1 else ""
            raise ModelError(f"{failure.message} (after {attempts} attempt{plural})", attempts=attempts)
        if breaker is None or not breaker.is_open:  # an open breaker paces the next attempt itself
            await asyncio.sleep(backoff(max(retried, 1), failure.retry_after, policy))


def backoff(attempt: int, retry_after: float | None, policy: RetryPolicy) -> float:
    """Wait what the server asked for; otherwise double each time, with jitter so that many
    concurrent callers do not retry in lockstep."""
    if retry_after is not None:
        return min(retry_after, policy.max_delay)
    delay = policy.base_delay * 2 ** (attempt - 1)
    return min(delay, policy.max_delay) * random.uniform(0.5, 1.0)


class Client:
    """One model's calls made robust: at most `concurrency` in flight, each attempt bounded by
    `timeout`, retried as `retries` allows, paced by the model's throttle and stopped by its
    breaker. One per model, shared by all its calls."""

    def __init__(self, settings: CallSettings) -> None:
        self.timeout = settings.timeout
        self.policy = RetryPolicy(retries=settings.retries)
        self.breaker = Breaker(settings.breaker_after, patience=settings.patience)
        self.throttle = Throttle(settings.concurrency)
        self._concurrency = settings.concurrency
        self._semaphore: asyncio.Semaphore | None = None

    @property
    def semaphore(self) -> asyncio.Semaphore:
        # Made on first use, so that it belongs to the loop the calls run on.
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self._concurrency)
        return self._semaphore

    async def call(self, send: Callable[[], Awaitable[T]], classify: Callable[[BaseException], Failure]) -> T:
        """`send()`'s result (see `call`)."""
        return await call(
            send,
            semaphore=self.semaphore,
            timeout=self.timeout,
            policy=self.policy,
            classify=classify,
            breaker=self.breaker,
            throttle=self.throttle,
        )

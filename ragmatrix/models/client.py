"""The one place model calls are made robust: concurrency, timeouts and bounded retries.

Every provider call goes through `call()`. It holds the model's semaphore only while a
request is in flight, bounds each attempt with `asyncio.wait_for` (some client libraries
ignore their own async timeout), and retries 429s, 5xx and timeouts with exponential backoff
that honours `Retry-After`. An empty answer is such a transient fault too. Other failures end
at once as a `ModelError`, which the plugin records as an error row, never as a score.

A `Breaker` per model watches the attempts: after K consecutive outages (timeouts, connection
errors, 5xx, empty answers) the model is down for the rest of the session, and every call
still queued or yet to come fails at once instead of waiting out its own timeouts.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class ModelError(Exception):
    """A model call that failed for good."""

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


class EmptyAnswer(Exception):
    """A reply that holds no answer (no choices, null or empty content): a server fault that
    may pass, retried like a 5xx and never cached."""


MODEL_DOWN = "model down after"  # how every error of a model whose breaker tripped begins


class Breaker:
    """Counts a model's consecutive failed attempts; after `threshold` of them the model is down.

    Any answer resets the count. Rate limits (429) and requests the server refuses (4xx) do
    not count: the server is there, it only says no.
    """

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.failures = 0
        self.down: str | None = None  # the message every later call fails with

    def check(self) -> None:
        if self.down is not None:
            raise ModelError(self.down, attempts=0)

    def success(self) -> None:
        if self.down is None:
            self.failures = 0

    def failure(self, message: str) -> None:
        self.failures += 1
        if self.down is None and self.failures >= self.threshold:
            self.down = f"{MODEL_DOWN} {self.failures} failures: last error {message}"


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
) -> T:
    attempt = 0
    while True:
        attempt += 1
        try:
            if breaker is not None:
                breaker.check()
            async with semaphore:
                if breaker is not None:  # it may have tripped while this call waited its turn
                    breaker.check()
                result = await asyncio.wait_for(send(), timeout)
            if breaker is not None:
                breaker.success()
            return result
        except TimeoutError:
            failure = Failure(f"timed out after {timeout:g} s", retryable=True)
        except EmptyAnswer as error:
            failure = Failure(f"empty answer ({error})", retryable=True)
        except (asyncio.CancelledError, ModelError):
            raise
        except Exception as error:  # providers raise many types; classify decides
            failure = classify(error)
        if breaker is not None and failure.counts_as_outage:
            breaker.failure(failure.message)
            if breaker.down is not None and failure.retryable and attempt <= policy.retries:
                raise ModelError(breaker.down, attempts=attempt)
        if not failure.retryable or attempt > policy.retries:
            plural = "s" if attempt > 1 else ""
            raise ModelError(f"{failure.message} (after {attempt} attempt{plural})", attempts=attempt)
        await asyncio.sleep(backoff(attempt, failure.retry_after, policy))


def backoff(attempt: int, retry_after: float | None, policy: RetryPolicy) -> float:
    """Wait what the server asked for; otherwise double each time, with jitter so that many
    concurrent callers do not retry in lockstep."""
    if retry_after is not None:
        return min(retry_after, policy.max_delay)
    delay = policy.base_delay * 2 ** (attempt - 1)
    return min(delay, policy.max_delay) * random.uniform(0.5, 1.0)

"""The one place model calls are made robust: concurrency, timeouts and bounded retries.

Every provider call goes through `call()`. It holds the model's semaphore only while a
request is in flight, bounds each attempt with `asyncio.wait_for` (some client libraries
ignore their own async timeout), and retries 429s, 5xx and timeouts with exponential backoff
that honours `Retry-After`. Other failures end at once as a `ModelError`, which the plugin
records as an error row, never as a score.
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


@dataclass(frozen=True)
class Failure:
    """How a provider classifies one failed attempt."""

    message: str
    retryable: bool
    retry_after: float | None = None


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
) -> T:
    attempt = 0
    while True:
        attempt += 1
        try:
            async with semaphore:
                return await asyncio.wait_for(send(), timeout)
        except TimeoutError:
            failure = Failure(f"timed out after {timeout:g} s", retryable=True)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # providers raise many types; classify decides
            failure = classify(error)
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

"""The run's event loop for every model call (held by the run's context, `ragmatrix.foundations.context`).

Test functions are synchronous; they hand coroutines to this loop and wait for the result. The
loop runs on a thread of its own for the whole run, so requests sent ahead of the items are
answered and read while the items run, and async HTTP clients and per-model semaphores live
across tests. Local CPU work (a sentence-transformers encode) never runs on it: the caller
does it in its own thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ragmatrix.foundations.context import current

T = TypeVar("T")


def loop() -> asyncio.AbstractEventLoop:
    return current().loop()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`coroutine`'s result, run on the run's loop in a copy of the caller's context."""
    return current().run(coroutine)


def at_close(closer: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Have the loop's closing await `closer()` before the loop closes: an HTTP session made on
    the loop (`ragmatrix.models.openai_chat`, litellm's clients) is closed where it lives."""
    current().at_close(closer)


def close() -> None:
    """Cancel what still runs on the loop, close the HTTP clients made on it, then the loop
    (which finalises async generators and the default executor): client libraries leak sessions
    and warn about destroyed tasks otherwise. The next call makes a new loop."""
    current().close_loop()

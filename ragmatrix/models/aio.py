"""One event loop per process for every model call, held by one `asyncio.Runner`.

Test functions are synchronous; they hand coroutines to this runner. Keeping a single loop
for the whole session lets async HTTP clients and per-model semaphores live across tests
instead of being bound to a loop that `asyncio.run` has already closed.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_runner: asyncio.Runner | None = None
_closers: list[Callable[[], Coroutine[Any, Any, Any]]] = []  # HTTP sessions made on the current loop


def runner() -> asyncio.Runner:
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    return _runner


def loop() -> asyncio.AbstractEventLoop:
    return runner().get_loop()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`coroutine`'s result, run in a copy of the caller's context: the runner's own context
    is the one it was created in, which would hide the item's sample and usage."""
    return runner().run(coroutine, context=contextvars.copy_context())


def at_close(closer: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Have `close()` await `closer()` on the loop before it closes it: an HTTP session made
    on the loop (`ragmatrix.models.openai_chat`) is closed where it lives."""
    _closers.append(closer)


def close() -> None:
    """Close the HTTP sessions made on the loop and litellm's clients, then the runner, which
    cancels what is still pending, finalises async generators and the default executor, and
    closes the loop: client libraries leak sessions and warn about destroyed tasks otherwise."""
    global _runner
    current, _runner = _runner, None
    closers = list(_closers)
    _closers.clear()
    if current is None:
        return
    for closer in closers:
        try:
            current.run(closer())
        except Exception:  # cleanup is best effort: the run's results are already stored
            pass
    if "litellm" in sys.modules:  # only if a model call imported it
        try:
            current.run(sys.modules["litellm"].close_litellm_async_clients())
        except Exception:  # cleanup is best effort: the run's results are already stored
            pass
    current.close()

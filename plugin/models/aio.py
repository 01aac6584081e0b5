"""One event loop per process for every model call.

Test functions are synchronous; they hand coroutines to this loop. Keeping a single loop
for the whole session lets async HTTP clients and per-model semaphores live across tests
instead of being bound to a loop that `asyncio.run` has already closed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None


def loop() -> asyncio.AbstractEventLoop:
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return loop().run_until_complete(coroutine)


def close() -> None:
    """Close the HTTP clients and finish background tasks, then the loop, as asyncio.run
    would: client libraries leak sessions and warn about destroyed tasks otherwise."""
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = None
        return
    if "litellm" in sys.modules:  # only if a model call imported it
        try:
            _loop.run_until_complete(sys.modules["litellm"].close_litellm_async_clients())
        except Exception:  # cleanup is best effort: the run's results are already stored
            pass
    pending = [task for task in asyncio.all_tasks(_loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        _loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    _loop.run_until_complete(_loop.shutdown_asyncgens())
    _loop.close()
    _loop = None

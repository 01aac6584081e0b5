"""One event loop per process for every model call.

Test functions are synchronous; they hand coroutines to this loop. Keeping a single loop
for the whole session lets async HTTP clients and per-model semaphores live across tests
instead of being bound to a loop that `asyncio.run` has already closed.
"""

from __future__ import annotations

import asyncio
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
    global _loop
    if _loop is not None and not _loop.is_closed():
        _loop.run_until_complete(_loop.shutdown_asyncgens())
        _loop.close()
    _loop = None

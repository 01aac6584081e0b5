"""The one event loop of model calls: an asyncio.Runner per process, closed at session end."""

from __future__ import annotations

import asyncio

from ragmatrix.models import aio
from ragmatrix.models.usage import current_sample


def test_calls_share_one_loop_and_see_the_callers_context():
    async def state() -> tuple[asyncio.AbstractEventLoop, int]:
        return asyncio.get_running_loop(), current_sample.get()

    token = current_sample.set(2)
    try:
        first_loop, sample = aio.run(state())
    finally:
        current_sample.reset(token)
    second_loop, default = aio.run(state())
    assert first_loop is second_loop and (sample, default) == (2, 0)
    aio.close()


def test_closing_cancels_what_is_pending_and_a_later_call_gets_a_fresh_loop():
    cancelled = []

    async def background() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def start() -> asyncio.AbstractEventLoop:
        asyncio.get_running_loop().create_task(background())
        await asyncio.sleep(0)
        return asyncio.get_running_loop()

    loop = aio.run(start())
    aio.close()
    assert cancelled == [True] and loop.is_closed()
    aio.close()  # twice is harmless
    assert aio.run(asyncio.sleep(0, result="again")) == "again" and aio.loop() is not loop
    aio.close()

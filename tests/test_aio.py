"""The one event loop of model calls: on a thread of its own for the whole run, closed at its end."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

import pytest
from project import bag_of_words

from ragmatrix.cost import current_work, working_on
from ragmatrix.models import aio
from ragmatrix.models.lexical import HashingBagOfWords
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


def test_the_loop_has_a_thread_of_its_own_which_ends_with_it():
    async def where() -> tuple[threading.Thread, str | None]:
        work = current_work.get()
        return threading.current_thread(), work.family if work is not None else None

    with working_on("text_retrieval"):  # cost attribution travels in the caller's context
        thread, family = aio.run(where())
    assert thread is not threading.current_thread() and thread.is_alive() and family == "text_retrieval"
    aio.close()
    assert not thread.is_alive()


def test_the_loop_is_uvloops_where_it_is_installed_and_asyncios_where_it_is_not(monkeypatch):
    uvloop = pytest.importorskip("uvloop")  # a dependency but on Windows
    assert isinstance(aio.loop(), uvloop.Loop)
    assert aio.run(asyncio.sleep(0, result="answered")) == "answered"
    aio.close()
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now fails
    assert not isinstance(aio.loop(), uvloop.Loop) and isinstance(aio.loop(), asyncio.BaseEventLoop)
    assert aio.run(asyncio.sleep(0, result="answered")) == "answered"
    aio.close()


def test_a_synchronous_call_from_the_loop_itself_is_refused_instead_of_hanging():
    async def nested() -> None:
        aio.run(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="await it instead"):
        aio.run(nested())
    aio.close()


def test_a_local_embedder_encodes_in_the_callers_thread_never_on_the_loop():
    class Recording(HashingBagOfWords):
        threads: list[threading.Thread] = []

        def embed(self, texts: list[str]) -> Any:
            self.threads.append(threading.current_thread())
            return super().embed(texts)

    aio.run(asyncio.sleep(0))  # the loop's thread is running
    model = bag_of_words(provider=Recording())
    model.embed_documents(["one text", "another"])
    model.embed_queries(["a query"])
    assert Recording.threads and set(Recording.threads) == {threading.current_thread()}
    aio.close()

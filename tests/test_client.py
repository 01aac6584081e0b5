"""The LLM client layer against a real local HTTP server, through both clients an `openai/...`
model can take: real litellm, and the direct HTTP client (`ragmatrix.models.openai_chat`).

Every fault the server can inject ends as a retry, an error or an invalid answer, the same way
on both.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from project import server_spec

from ragmatrix.foundations.cache import SqliteCache
from ragmatrix.foundations.context import new_loop
from ragmatrix.models import aio, client
from ragmatrix.models.chat import LLM, MAX_ANSWER_CHARS
from ragmatrix.models.client import ModelError, Throttle
from ragmatrix.models.openai_chat import OpenAIChat
from ragmatrix.models.providers.litellm_chat import LitellmChat
from ragmatrix.models.usage import Usage, current_usage
from ragmatrix.testing.openai_server import Reply

QUESTION = [{"role": "user", "content": "Is the sky blue?"}]


CLIENTS = {"litellm": LitellmChat, "direct": OpenAIChat}


@pytest.fixture(params=sorted(CLIENTS))
def chat_model(request):
    """Makes an LLM on the local server, through each client in turn."""

    def make(server, tmp_path=None, **settings) -> LLM:
        spec = server_spec(server, "llm", "scripted", **settings)
        cache = SqliteCache("responses", tmp_path) if tmp_path is not None else None
        return LLM(spec, CLIENTS[request.param](spec), cache)

    return make


# Each test closes the process's event loop and the HTTP clients bound to it.
pytestmark = pytest.mark.usefixtures("fresh_event_loop")


def test_a_plain_answer(chat_model, server):
    server.answer = "yes"
    assert chat_model(server).chat(QUESTION) == "yes"
    assert server.count() == 1


def test_429_is_retried_after_the_servers_retry_after(chat_model, server):
    server.inject(Reply.error(429, retry_after=0.6))
    started = time.perf_counter()
    assert chat_model(server).chat(QUESTION) == "yes"
    assert time.perf_counter() - started >= 0.6
    assert server.count() == 2


def test_5xx_is_retried_a_bounded_number_of_times(chat_model, server):
    server.inject(Reply.error(500), Reply.error(503))
    assert chat_model(server).chat(QUESTION) == "yes"
    assert server.count() == 3
    server.reset()
    server.inject(*[Reply.error(500)] * 5)
    with pytest.raises(ModelError, match=r"HTTP 500 .*after 3 attempts"):
        chat_model(server).chat(QUESTION)
    assert server.count() == 3  # 1 try + 2 retries: litellm and the SDK do not retry on their own


def test_other_4xx_is_not_retried(chat_model, server):
    server.inject(Reply.error(400, message="bad request"))
    with pytest.raises(ModelError, match=r"HTTP 400 .*after 1 attempt\)"):
        chat_model(server).chat(QUESTION)
    assert server.count() == 1


def test_a_hang_past_the_timeout_is_retried_then_answered(chat_model, server):
    server.inject(Reply.hang(60))  # then it would answer the first request: only a timeout asks twice
    assert chat_model(server, timeout=0.5).chat(QUESTION) == "yes"
    assert server.count() == 2


def test_a_server_that_keeps_hanging_ends_as_an_error(chat_model, server):
    server.inject(*[Reply.hang(5)] * 3)
    with pytest.raises(ModelError, match="after 2 attempts"):
        chat_model(server, timeout=0.3, retries=1).chat(QUESTION)


def test_a_non_json_body_ends_as_an_error_not_a_crash(chat_model, server):
    server.inject(*[Reply.garbage()] * 5)
    with pytest.raises(ModelError):
        chat_model(server, retries=1).chat(QUESTION)


def test_empty_choices_null_content_and_empty_text_are_retried_like_a_5xx(chat_model, server, tmp_path):
    server.inject(Reply.empty_choices(), Reply.null_content(), Reply.text(""))
    model = chat_model(server, tmp_path, retries=3)
    assert model.chat(QUESTION) == "yes"
    assert server.count() == 4
    server.reset()
    server.inject(*[Reply.null_content()] * 3)
    with pytest.raises(ModelError, match=r"empty answer \(content null\).*after 3 attempts"):
        chat_model(server, tmp_path).chat([{"role": "user", "content": "again"}])
    assert len(model.cache) == 1  # only the real answer was cached


def test_an_answer_past_the_maximum_is_cut_and_counted(chat_model, server, tmp_path):
    server.answer = "yes " * 300_000
    usage = Usage()
    token = current_usage.set(usage)
    try:
        answer = chat_model(server, tmp_path).chat(QUESTION)
        again = chat_model(server, tmp_path).chat(QUESTION)  # replayed from the cache, still cut
    finally:
        current_usage.reset(token)
    assert len(answer) == MAX_ANSWER_CHARS and again == answer
    assert usage.answers_cut == 2 and usage.to_json()["answers_cut"] == 2
    assert server.count() == 1


def test_the_breaker_probes_and_gives_the_model_up_only_when_probes_keep_failing(chat_model, server):
    server.inject(*[Reply.error(503)] * 10)
    # timeout 1 s: probes may keep failing for two timeouts; they go 0.5 s and 1.5 s after it opened
    model = chat_model(server, retries=1, breaker_after=3, concurrency=1)
    with pytest.raises(ModelError, match=r"HTTP 503"):
        model.chat(QUESTION)
    with pytest.raises(
        ModelError, match=r"^model down after 3 failures and 2 failed probes over \d+\.\d s: last error HTTP 503"
    ):
        model.chat([{"role": "user", "content": "second"}])
    assert server.count() == 3 + 2
    with pytest.raises(ModelError, match=r"^model down after 3"):
        model.chat([{"role": "user", "content": "third"}])
    assert server.count() == 5  # asked no more


def test_a_blip_opens_the_breaker_and_every_waiting_call_goes_on_once_a_probe_is_answered(chat_model, server):
    server.outage(1.0)  # every request gets a 500 for a second
    model = chat_model(server, timeout=5, retries=2, breaker_after=2, concurrency=4)
    answers = model.chat_many([[{"role": "user", "content": f"q{i}"}] for i in range(12)])
    assert answers == ["yes"] * 12
    assert model.breaker.opened >= 1 and model.breaker.down is None
    failed = sum(1 for r in server.requests if r["time"] < server.requests[0]["time"] + 1.0)
    assert failed < 12  # the calls waited for the probe instead of spending their retries


def test_connection_resets_are_outages_the_breaker_rides_out(chat_model, server):
    server.inject(*[Reply.reset()] * 4)
    model = chat_model(server, timeout=5, retries=1, breaker_after=3, concurrency=1)
    answers = model.chat_many([[{"role": "user", "content": f"q{i}"}] for i in range(3)])
    assert answers == ["yes"] * 3
    assert model.breaker.opened == 1 and server.count() == 4 + 3


def test_a_retry_after_holds_every_request_of_the_model(chat_model, server):
    model = chat_model(server, timeout=5, concurrency=1)
    assert model.chat(QUESTION) == "yes"
    server.inject(Reply.error(429, retry_after=1.0))
    assert model.chat_many([[{"role": "user", "content": f"q{i}"}] for i in range(3)]) == ["yes"] * 3
    refused, *others = [r["time"] for r in server.requests[1:]]
    # the next request could have gone at once (one in flight at a time, none was): it waited too
    assert len(others) == 3 and min(others) >= refused + 1.0


def test_rate_limits_shrink_the_requests_in_flight_and_let_them_grow_back(chat_model, server):
    server.latency = 0.1
    server.rate_limit(10)  # the server accepts 10 requests a second, refuses the rest with a 429
    model = chat_model(server, timeout=10, retries=30, concurrency=16)
    answers = model.chat_many([[{"role": "user", "content": f"q{i}"}] for i in range(60)])
    assert answers == ["yes"] * 60
    assert model.throttle.cuts >= 1 and model.throttle.limit < 16
    # Left at 16 in flight, the client was refused 140 times for these 60 answers (35 requests
    # a second); paced, about 40 times (15 a second).
    assert server.rate_limited <= 60
    server.rate_limit(None)
    server.latency = 0.0
    model.chat_many([[{"role": "user", "content": f"r{i}"}] for i in range(200)])
    assert model.throttle.limit == 16  # grown back by about one per round of answers


def test_a_throttle_cuts_once_per_round_and_grows_back_one_request_per_round():
    throttle = Throttle(8)

    async def send_round(n: int) -> list[int]:
        return [await throttle.acquire() for _ in range(n)]

    first_round = asyncio.run(send_round(8))
    for cuts in first_round:  # the whole round is refused: one cut, not eight
        throttle.release()
        throttle.rate_limited(cuts, retry_after=None)
    assert throttle.limit == 4 and throttle.cuts == 1
    (late,) = asyncio.run(send_round(1))
    throttle.release()
    throttle.rate_limited(late, retry_after=None)  # sent after the cut, refused again: cut again
    assert throttle.limit == 2
    for _ in range(2):
        throttle.answered()
    assert 2.8 < throttle.limit < 3  # a round of two answers: about one more (1/2, then 1/2.5)
    for _ in range(100):
        throttle.answered()
    assert throttle.limit == 8  # never above the model's concurrency


def test_rate_limits_and_answers_do_not_trip_the_breaker(chat_model, server):
    model = chat_model(server, retries=3, breaker_after=2)
    server.inject(Reply.error(429, retry_after=0), Reply.error(429, retry_after=0), Reply.error(429, retry_after=0))
    assert model.chat(QUESTION) == "yes"
    server.inject(Reply.error(500))
    assert model.chat([{"role": "user", "content": "b"}]) == "yes"  # the answer reset the count
    server.inject(Reply.error(500))
    assert model.chat([{"role": "user", "content": "c"}]) == "yes"
    assert model.breaker.down is None


def test_responses_are_cached_per_sample_and_errors_never(chat_model, server, tmp_path):
    model = chat_model(server, tmp_path)
    server.inject(Reply.error(400))
    with pytest.raises(ModelError):
        model.chat(QUESTION)
    server.answer = "first"
    assert model.chat(QUESTION) == "first"  # the error was not cached
    server.answer = "second"
    assert model.chat(QUESTION) == "first"  # the answer was
    assert aio.run(model.achat(QUESTION, sample=1)) == "second"  # another iteration, another sample
    assert server.count() == 3


def test_the_concurrency_limit_holds(chat_model, server):
    # No attempt may time out while the server waits for all three: a retry would be a fourth.
    # The server waits at most its patience (60 s), each attempt longer; and a first call
    # (litellm's import, seconds of CPU on a loaded machine) is made before the gathering.
    model = chat_model(server, concurrency=3, timeout=90)
    assert model.chat(QUESTION) == "yes"
    # Three requests answered together, each after half a second: a fourth sent beside them
    # would be in flight with them.
    server.gather(3)
    server.latency = 0.5
    answers = model.chat_many([[{"role": "user", "content": f"q{i}"}] for i in range(9)])
    assert answers == ["yes"] * 9
    assert server.max_concurrency == 3


def test_usage_is_counted_and_an_unpriceable_model_costs_nothing_recorded(chat_model, server, tmp_path):
    usage = Usage()
    token = current_usage.set(usage)
    try:
        model = chat_model(server, tmp_path)
        model.chat(QUESTION)
        model.chat(QUESTION)
    finally:
        current_usage.reset(token)
    data = usage.to_json()
    assert data["calls"] == 2 and data["cached_calls"] == 1
    assert data["prompt_tokens"] > 0
    assert "cost_usd" not in data


def test_api_keys_never_reach_an_error_message(chat_model, server, monkeypatch):
    secret = "sk-test-abcdefghijklmnop1234"
    monkeypatch.setenv("SCRIPTED_API_KEY", secret)
    server.inject(Reply.error(401, message=f"Incorrect API key provided: {secret}"))
    with pytest.raises(ModelError) as raised:
        chat_model(server, api_key_env="SCRIPTED_API_KEY").chat(QUESTION)
    assert secret not in str(raised.value)
    assert server.requests[-1]["headers"]["authorization"] == f"Bearer {secret}"


def test_timeouts_hold_even_when_the_library_ignores_its_own(chat_model, server):
    # the client layer (`bounded`) stops each attempt whatever the client library does
    server.inject(Reply.hang(60), Reply.hang(60))  # then each would answer: only timeouts end the call first
    model = chat_model(server, timeout=0.2, retries=1)
    with pytest.raises(ModelError, match="timed out"):
        model.chat(QUESTION)
    assert server.count() == 2


# -- one attempt's limits (`bounded`): a timer on the caller's own task ---------------------------


def stopped(request_ends: list[str], **limits: object) -> tuple[str, int]:
    """What `bounded` raised for a request that never answers, and the caller task's pending
    cancellations afterwards (none may be left behind)."""

    async def never_answers() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            request_ends.append("stopped")

    async def caller() -> tuple[str, int]:
        try:
            await client.bounded(never_answers(), **limits)  # type: ignore[arg-type]
        except TimeoutError as error:
            await asyncio.sleep(0)  # a cancellation left pending would be raised here
            task = asyncio.current_task()
            assert task is not None
            return type(error).__name__, task.cancelling()
        raise AssertionError("no limit passed")

    return asyncio.run(caller())


def test_an_attempt_past_its_timeout_is_stopped_where_it_waits_and_leaves_no_cancellation():
    ends: list[str] = []
    assert stopped(ends, timeout=0.05, longest=60.0) == ("TimeoutError", 0)
    assert ends == ["stopped"]


def test_an_attempt_is_busy_not_timed_out_while_the_server_answers_others():
    ends: list[str] = []
    slowed: list[bool] = []
    limits = {"timeout": 0.05, "longest": 1.0, "heard": time.monotonic, "slowed": lambda: slowed.append(True)}
    assert stopped(ends, **limits) == ("BusyServer", 0)
    assert ends == ["stopped"] and slowed == [True]  # told once that it passed its timeout


def test_an_attempt_cancelled_from_outside_is_cancelled_not_timed_out():
    ends: list[str] = []

    async def main() -> None:
        started = asyncio.Event()

        async def request() -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            finally:
                ends.append("stopped")

        attempt = asyncio.create_task(client.bounded(request(), timeout=60.0, longest=600.0))
        await started.wait()
        attempt.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt

    asyncio.run(main())
    assert ends == ["stopped"]


@pytest.mark.parametrize("loop", ["asyncio", "the run's"])
def test_an_answer_that_came_while_the_loop_was_held_past_the_timeout_stands(loop):
    """A process stopped (Ctrl-Z) or starved past an attempt's timeout: the answer that came
    meanwhile is read, not cut off by the timer that runs late beside it (asyncio's loop runs
    the reading first and the timer after, uvloop's the timer first)."""
    ours, theirs = socket.socketpair()

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        ours.setblocking(False)

        def answered_then_held() -> None:
            theirs.send(b"yes")
            time.sleep(1.5)  # the loop cannot run: the timer is due meanwhile, the answer waits

        loop.call_soon(answered_then_held)
        return await client.bounded(loop.sock_recv(ours, 16), timeout=0.5, longest=10.0)

    with ours, theirs, asyncio.Runner(loop_factory=None if loop == "asyncio" else new_loop) as runner:
        assert runner.run(main()) == b"yes"


@pytest.mark.parametrize("loop", ["asyncio", "the run's"])
def test_an_answer_that_came_while_the_loop_was_held_again_in_its_second_look_stands(loop):
    """Held past the timeout, then held again briefly just after the late check (a machine
    that keeps stalling): the second look is late too, so it waits again instead of judging
    before the answer that came meanwhile is read."""
    ours, theirs = socket.socketpair()

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        ours.setblocking(False)

        def answered_then_held_again() -> None:  # due just after the first (late) check
            theirs.send(b"yes")
            time.sleep(0.15)

        loop.call_soon(time.sleep, 1.5)  # past the timeout, nothing came yet
        loop.call_later(0.55, answered_then_held_again)
        return await client.bounded(loop.sock_recv(ours, 16), timeout=0.5, longest=10.0)

    with ours, theirs, asyncio.Runner(loop_factory=None if loop == "asyncio" else new_loop) as runner:
        assert runner.run(main()) == b"yes"


def test_an_attempt_with_no_time_at_all_is_never_sent():
    sent: list[bool] = []

    async def request() -> None:
        sent.append(True)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await client.bounded(request(), timeout=0.0, longest=0.0)

    asyncio.run(main())
    assert sent == []

"""The client layer under load, against the local test server: a Retry-After past its cap, a
server that accepts a few requests a second (with and without Retry-After), answers of many
megabytes, and a server that answers one request at a time while the others queue.

Every test counts outcomes (answers, rows, requests, bytes), never durations.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from project import models_yaml, server_spec, write

from ragmatrix.foundations.cache import SqliteCache
from ragmatrix.models import aio, chat
from ragmatrix.models.chat import LLM, MAX_ANSWER_CHARS, REDACTION_MARGIN, kept_answer
from ragmatrix.models.client import MAX_RETRY_AFTER, ModelError, Throttle
from ragmatrix.models.embedder import EmbeddingModel
from ragmatrix.models.openai_chat import MAX_BODY_BYTES, OpenAIChat
from ragmatrix.models.providers.litellm_chat import LitellmChat
from ragmatrix.models.providers.litellm_embedder import LitellmEmbedding
from ragmatrix.models.usage import Usage, current_usage
from ragmatrix.testing.openai_server import Reply

CLIENTS = {"litellm": LitellmChat, "direct": OpenAIChat}

pytestmark = pytest.mark.usefixtures("fresh_event_loop")


def llm(server, client: str, tmp_path=None, **settings) -> LLM:
    spec = server_spec(server, "llm", "scripted", **settings)
    cache = SqliteCache("responses", tmp_path) if tmp_path is not None else None
    return LLM(spec, CLIENTS[client](spec), cache)


def ask_all(model: LLM, n: int, within: float = 300.0) -> list[str | BaseException]:
    """Every answer or error of `n` distinct questions asked at once. `within` only stops a
    run that would otherwise hang; no outcome depends on it."""

    async def gather() -> list[str | BaseException]:
        asks = (model.achat([{"role": "user", "content": f"question {i}"}]) for i in range(n))
        return list(await asyncio.wait_for(asyncio.gather(*asks, return_exceptions=True), within))

    return aio.run(gather())


# --- Retry-After past its cap ---------------------------------------------------------------


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_retry_after_of_an_hour_is_not_honoured_the_attempt_is_retried_like_a_5xx(server, client):
    model = llm(server, client, timeout=5, concurrency=4)
    server.inject(*[Reply.error(429, retry_after=3600)] * 4)  # the first attempt of each of 4 items
    answers = ask_all(model, 4, within=60)
    assert answers == ["yes"] * 4
    assert server.count() == 8
    # Nothing holds the model for the hour the server asked for.
    assert model.throttle.paused_until <= time.monotonic() + MAX_RETRY_AFTER


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_server_that_always_asks_for_an_hour_gives_error_rows_that_name_the_cap(server, client):
    model = llm(server, client, timeout=5, retries=2, breaker_after=50)
    server.inject(*[Reply.error(429, retry_after=3600)] * 3)
    (error,) = ask_all(model, 1, within=60)
    assert isinstance(error, ModelError)
    assert f"(Retry-After 3600 s is past the cap of {MAX_RETRY_AFTER:g} s) (after 3 attempts)" in str(error)
    assert "HTTP 429" in str(error) and server.count() == 3


# --- pacing by rate ---------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "retry_after"), [("direct", True), ("direct", False), ("litellm", False)], ids=str)
def test_a_server_that_accepts_3_requests_a_second_answers_34_of_34_at_concurrency_16(server, client, retry_after):
    server.rate_limit(3, retry_after=retry_after)
    model = llm(server, client, timeout=10, concurrency=16, retries=3)  # as every entry by default
    answers = ask_all(model, 34)
    assert answers == ["yes"] * 34  # before pacing by rate: 27 of 34 errors without Retry-After
    # The requests start at about the rate the server accepts: a few refusals while it is learned
    # (the first burst of 16) and as it probes upwards, not hundreds.
    assert model.throttle.rate is not None and model.throttle.rate < 16
    assert server.rate_limited < 2 * 34, server.rate_limited


def test_a_429_sets_the_rate_to_what_the_server_accepted_in_the_second_before_it():
    throttle = Throttle(16)

    async def send(n: int) -> list:
        tickets = [await throttle.acquire() for _ in range(n)]
        for _ in tickets:
            throttle.release()
        return tickets

    burst = asyncio.run(send(16))
    assert throttle.rate is None  # unpaced until refused
    for ticket in burst[3:]:  # the server let 3 in and refused 13, in any order
        throttle.rate_limited(ticket, retry_after=None)
    assert throttle.accepted_rate == 3.0 and throttle.rate == pytest.approx(2.7)  # a little under it
    assert throttle.limit == 8  # one cut of the requests in flight per round
    for _ in range(6):  # just under the rate the server refused at, it grows slowly
        throttle.answered()
    assert 2.7 < throttle.rate < 2.85


def test_the_refusals_of_one_second_at_most_halve_the_rate():
    throttle = Throttle(4)
    throttle.rate = throttle.accepted_rate = 10.0

    async def send(n: int) -> list:
        tickets = [await throttle.acquire() for _ in range(n)]
        for _ in tickets:
            throttle.release()
        return tickets

    async def refuse_two() -> None:
        # The second is sent after the first refusal lowered the rate, within the same second:
        # the server still counts what it refused the first for.
        for _ in range(2):
            (ticket,) = await send(1)
            ticket.sent_at -= 5  # the server took it late: nothing it accepted shows in the second before
            throttle.rate_limited(ticket, retry_after=None)

    asyncio.run(refuse_two())
    # Half the rate the window began at, not a quarter: both were refused within one second.
    assert throttle.accepted_rate == 5.0 and throttle.rate == pytest.approx(4.5)
    for _ in range(20):  # just under the accepted rate, it grows slowly
        throttle.answered()
    assert 4.5 < throttle.rate < 4.8
    throttle.rate = 1.0
    for _ in range(20):  # far under it, fast: about RATE_GROWTH per second of answers
        throttle.answered()
    assert throttle.rate > 4.0


# --- oversized answers ------------------------------------------------------------------------


def test_a_50_mb_answer_is_read_only_up_to_the_cap_on_the_direct_client(server, tmp_path):
    size = 50 * 1024 * 1024
    server.inject(Reply.long_answer(size))
    model = llm(server, "direct", tmp_path)
    usage = Usage()
    token = current_usage.set(usage)
    try:
        answer = model.chat([{"role": "user", "content": "Say yes, many times."}])
    finally:
        current_usage.reset(token)
    assert len(answer) == MAX_ANSWER_CHARS and answer.startswith("yes yes")
    assert usage.answers_cut == 1
    assert json.dumps(model.cache.get(model.cache_key([{"role": "user", "content": "Say yes, many times."}], 0)))
    received = model.provider.http.received
    assert received <= MAX_BODY_BYTES + 1  # the body read: about 260 KB of the 50 MB
    assert server.bytes_sent < size // 2  # the client hung up: the server could not send the rest
    assert server.count() == 1


def test_an_oversized_answer_is_cut_before_its_secrets_are_taken_out_on_litellm_too(server, monkeypatch):
    sizes: list[int] = []
    real = chat.redact

    def measured(text: str, names=()):
        sizes.append(len(text))
        return real(text, names)

    monkeypatch.setattr(chat, "redact", measured)
    server.inject(Reply.long_answer(10 * 1024 * 1024))
    answer = llm(server, "litellm").chat([{"role": "user", "content": "Say yes, many times."}])
    assert len(answer) == MAX_ANSWER_CHARS
    assert sizes and max(sizes) <= MAX_ANSWER_CHARS + REDACTION_MARGIN  # never the 10 MB


def test_a_secret_that_the_cut_splits_is_dropped_and_one_before_it_is_redacted(monkeypatch):
    secret = "sk-live-QWERTYUIOPASDFGHJKLZXCVBNM"
    monkeypatch.setenv("SERVING_TEST_KEY", secret)
    split_at = MAX_ANSWER_CHARS + REDACTION_MARGIN - 7  # the first cut leaves its first 7 characters
    text = f"head {secret} " + "a" * (split_at - len(secret) - 6) + secret + "b" * 1000
    assert text.index(secret, 10) == split_at
    kept, cut = kept_answer(text, ("SERVING_TEST_KEY",))
    assert cut and len(kept) <= MAX_ANSWER_CHARS
    assert secret not in kept and secret[:7] not in kept and kept.startswith("head *** aaa")


# --- a server that answers one request at a time ------------------------------------------------


def twenty_items() -> str:
    cases = "\n".join(
        f"""  - case: question_{i}
    input:
      prompt: Is fragment {i} about cancer?
      instruction: *explicit
      fragments: ["The EGFR pathway is deregulated in a number of cancers ({i})."]
    expected: {{answer: "yes"}}"""
        for i in range(10)
    )
    wordings = """_prompts:
  explicit: &explicit
    simple: "Judge the fragment for relevance. Answer yes or no."
    strict: "Answer with exactly one word, yes or no. Is the fragment relevant?"
"""
    return f"{wordings}rag_interpretation:\n{cases}\n"


def test_a_server_answering_one_request_a_second_ends_20_of_20_items_at_concurrency_4_and_timeout_3(bench, server):
    """Requests queue on the server: the fourth of four waits 4 s, past its 3 s timeout, while
    the server answers the others. Before, that timeout was an outage: the retries added the same
    work again (the server computes what the client gave up) and the breaker took the model down."""
    server.one_at_a_time = True
    server.latency = 1.0
    write(bench.path / "benchmark/data/rag_interpretation_data.yaml", twenty_items())
    entry = models_yaml(server.base_url).replace("    timeout: 10\n", "    timeout: 3\n")
    write(bench.path / "benchmark/models.yaml", entry)
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted")
    result.assert_outcomes(passed=20)
    rows = [json.loads(line) for line in (bench.path / "benchmark/results/rag_interpretation.jsonl").open()]
    assert sum(r["status"] == "ok" for r in rows if r["model"] == "scripted") == 20
    assert server.count() == 20  # no request was sent twice: the server was busy, not down


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_queueing_server_never_opens_the_breaker_and_cuts_the_requests_in_flight(server, client):
    server.one_at_a_time = True
    server.latency = 0.4
    model = llm(server, client, timeout=1.0, concurrency=4, retries=0)  # no retry to hide a timeout
    assert ask_all(model, 12) == ["yes"] * 12
    assert model.breaker.opened == 0 and server.count() == 12
    assert model.throttle.cuts >= 1  # the fourth of four waited past its timeout


def test_a_request_that_hangs_while_others_are_answered_ends_as_a_busy_server_not_an_outage(server):
    server.on("stuck", Reply.hang(30))
    # 2 s: on a loaded machine one of the others' round trips once took past 1 s, and the server
    # then looked silent to the stuck request (timed out, where it waits 3 timeouts while busy)
    model = llm(server, "direct", timeout=2.0, concurrency=2, retries=0)

    async def both() -> tuple[BaseException | str, list[str]]:
        # others are asked one after another for as long as the stuck one waits, however fast
        # this machine answers them (a fixed number ran out early on a fast or a busy machine)
        stuck = asyncio.ensure_future(model.achat([{"role": "user", "content": "stuck"}]))
        others: list[str] = []
        while not stuck.done():
            others.append(await model.achat([{"role": "user", "content": f"q{len(others)}"}]))
        outcome: BaseException | str = stuck.exception() or stuck.result()
        return outcome, others

    stuck, others = aio.run(both())
    assert others and set(others) == {"yes"}
    assert isinstance(stuck, ModelError) and stuck.busy
    assert "while the server answered other requests (busy, not down" in str(stuck)
    assert model.breaker.failures == 0 and model.breaker.opened == 0


def test_a_remote_embedder_splits_a_batch_the_server_cannot_answer_in_time(server):
    server.latency_per_input = 0.3  # a batch of 8 texts takes 2.4 s, one of 2 texts 0.6 s
    spec = server_spec(server, "embedder", "test-embed", timeout=1.0, concurrency=4, batch_size=8, retries=1)
    embedder = EmbeddingModel(spec, LitellmEmbedding(spec), None)
    rows = embedder.embed_documents([f"text number {i}" for i in range(8)])
    assert rows.shape == (8, 16)
    assert embedder.batch_size == 2  # later batches are no larger than what the server answered in time
    sizes = [len(r["body"]["input"]) for r in server.requests if r["path"].endswith("embeddings")]
    assert sizes == [8, 4, 4, 2, 2, 2, 2]  # never the same batch again

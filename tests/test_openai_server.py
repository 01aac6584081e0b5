"""Tests of the scripted OpenAI-compatible server, over real HTTP (urllib and litellm)."""

from __future__ import annotations

import json
import math
import os
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragmatrix.testing.openai_server import OpenAIServer, Reply, embed_text

# Must be set before litellm is first imported: it otherwise fetches the cost map over the net.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO_ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "user", "content": "Is the sky blue?"}]


@pytest.fixture
def srv() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def _post(url: str, payload: dict[str, Any], timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """POST JSON; returns (status, lower-cased headers, raw body) for errors as well."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, _lower(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers.items()), error.read()


def _lower(items: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in items}


def _chat(srv: OpenAIServer, content: str = "Is the sky blue?") -> tuple[int, dict[str, str], bytes]:
    return _post(
        f"{srv.base_url}/chat/completions",
        {"model": "test-model", "messages": [{"role": "user", "content": content}]},
    )


def _content(body: bytes) -> str | None:
    return json.loads(body)["choices"][0]["message"]["content"]


# -- plain HTTP -----------------------------------------------------------------------------


def test_normal_answer_in_openai_format(srv: OpenAIServer) -> None:
    status, headers, body = _chat(srv, "one two three")
    assert status == 200
    assert headers["content-type"] == "application/json"
    data = json.loads(body)
    assert data["object"] == "chat.completion"
    assert data["model"] == "test-model"
    assert data["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"}
    ]
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")


def test_paths_without_v1_prefix_and_models_listing(srv: OpenAIServer) -> None:
    root = srv.base_url.removesuffix("/v1")
    status, _, body = _post(f"{root}/chat/completions", {"model": "other", "messages": MESSAGES})
    assert status == 200 and _content(body) == "yes"
    with urllib.request.urlopen(f"{srv.base_url}/models", timeout=5) as response:
        names = [m["id"] for m in json.loads(response.read())["data"]]
    assert {"test-model", "other"} <= set(names)
    status, _, body = _post(f"{root}/nowhere", {})
    assert status == 404 and "error" in json.loads(body)


def test_answer_may_be_a_callable_of_the_messages(srv: OpenAIServer) -> None:
    srv.answer = lambda messages: messages[-1]["content"].upper()
    assert _content(_chat(srv, "shout")[2]) == "SHOUT"


def test_error_reply_with_retry_after(srv: OpenAIServer) -> None:
    srv.inject(Reply.error(429, retry_after=1.5), Reply.error(503, retry_after=2), Reply.error(500))
    status, headers, body = _chat(srv)
    assert status == 429 and headers["retry-after"] == "1.5"
    error = json.loads(body)["error"]
    assert set(error) >= {"message", "type", "code"}
    status, headers, _ = _chat(srv)
    assert status == 503 and headers["retry-after"] == "2"
    status, headers, _ = _chat(srv)
    assert status == 500 and "retry-after" not in headers
    assert _chat(srv)[0] == 200  # the queue is spent


def test_garbage_empty_choices_and_null_content(srv: OpenAIServer) -> None:
    srv.inject(Reply.garbage(), Reply.empty_choices(), Reply.null_content())
    status, _, body = _chat(srv)
    assert status == 200 and body == b"<html>not json</html>"
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    status, _, body = _chat(srv)
    assert status == 200 and json.loads(body)["choices"] == []
    status, _, body = _chat(srv)
    assert status == 200 and _content(body) is None


def test_fault_queue_is_fifo_across_endpoints(srv: OpenAIServer) -> None:
    srv.inject("first", Reply.error(418), "third")
    assert _content(_chat(srv)[2]) == "first"
    status, _, _ = _post(f"{srv.base_url}/embeddings", {"model": "e", "input": "x"})
    assert status == 418
    assert _content(_chat(srv)[2]) == "third"
    assert _content(_chat(srv)[2]) == "yes"
    assert srv.count() == 3 and srv.count("embeddings") == 1


def test_rules_match_any_message_and_repeat_the_last_reply(srv: OpenAIServer) -> None:
    srv.on("capital", "Paris", "Lyon")
    ask = [
        {"role": "system", "content": "Answer about the capital."},
        {"role": "user", "content": "Which city?"},
    ]
    answers = [
        _content(_post(f"{srv.base_url}/chat/completions", {"model": "m", "messages": ask})[2]) for _ in range(3)
    ]
    assert answers == ["Paris", "Lyon", "Lyon"]
    assert _content(_chat(srv, "unrelated")[2]) == "yes"
    # The fault queue comes before the rules.
    srv.inject(Reply.error(500))
    assert _chat(srv, "capital")[0] == 500
    assert _content(_chat(srv, "capital")[2]) == "Lyon"


def test_hang_then_normal_answer(srv: OpenAIServer) -> None:
    srv.inject(Reply.hang(0.3))
    start = time.monotonic()
    status, _, body = _chat(srv)
    assert status == 200 and _content(body) == "yes"
    assert time.monotonic() - start >= 0.3


class Clock:
    """A clock the test moves itself: what the outage and the rate limit count."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_answers_500_for_its_seconds_then_serves_again() -> None:
    clock = Clock()
    with OpenAIServer(clock=clock) as srv:
        srv.on("sky", "a rule")
        srv.outage(0.5, from_first_request=True)
        clock.now += 0.6  # it starts with the first request, not when it was set
        assert _chat(srv)[0] == 500 and _post(f"{srv.base_url}/embeddings", {"input": "x"})[0] == 500
        with urllib.request.urlopen(f"{srv.base_url}/models", timeout=5) as response:
            assert response.status == 200  # the models list keeps answering
        clock.now += 0.49
        assert _chat(srv)[0] == 500
        clock.now += 0.02
        status, _, body = _chat(srv)
        assert status == 200 and _content(body) == "a rule"


def test_a_rate_limit_refuses_what_exceeds_it_with_a_retry_after() -> None:
    clock = Clock()
    with OpenAIServer(clock=clock) as srv:
        srv.rate_limit(3)
        answers = [_chat(srv) for _ in range(3)]
        clock.now += 0.3351
        answers += [_chat(srv) for _ in range(2)]
        assert [status for status, _, _ in answers] == [200, 200, 200, 429, 429]
        # 0.6649 s until the first place frees, rounded up: a client that waits exactly the
        # Retry-After it was given is let in (rounded to the nearest, 0.66 s, it was refused again)
        assert [answers[3][1]["retry-after"], answers[4][1]["retry-after"]] == ["0.67", "0.67"]
        assert srv.rate_limited == 2
        clock.now += float(answers[4][1]["retry-after"])
        assert _chat(srv)[0] == 200


def test_a_reset_closes_the_connection_without_an_answer(srv: OpenAIServer) -> None:
    srv.inject(Reply.reset())
    with pytest.raises((ConnectionError, urllib.error.URLError, OSError)):
        _chat(srv)
    assert _chat(srv)[0] == 200


def test_an_echo_key_answer_repeats_the_bearer_token_in_a_normal_answer(srv: OpenAIServer) -> None:
    srv.on("sky", Reply.echo_key_answer())
    status, _, body = _chat(srv)
    assert status == 200 and "the key x)" in _content(body)


def test_stop_does_not_wait_for_a_hanging_handler() -> None:
    server = OpenAIServer().start()
    server.inject(Reply.hang(3600))
    outcome: list[object] = []

    def ask() -> None:
        try:
            outcome.append(_chat(server)[0])
        except OSError as error:  # the aborted connection: what a real client would see
            outcome.append(error)

    client = threading.Thread(target=ask, daemon=True)
    client.start()
    deadline = time.monotonic() + 5
    while server.count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    stopper = threading.Thread(target=server.stop, daemon=True)
    stopper.start()
    stopper.join(timeout=60)  # a stop that waited for the handler would wait an hour
    assert not stopper.is_alive()
    client.join(timeout=60)
    assert not client.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], OSError)  # no answer after stop()


def test_embeddings_are_deterministic_and_normalised(srv: OpenAIServer) -> None:
    url = f"{srv.base_url}/embeddings"
    status, _, body = _post(url, {"model": "test-embed", "input": ["red apple", "blue sky", ""]})
    assert status == 200
    data = json.loads(body)
    assert data["object"] == "list" and data["model"] == "test-embed"
    assert [d["index"] for d in data["data"]] == [0, 1, 2]
    vectors = [d["embedding"] for d in data["data"]]
    for vector in vectors:
        assert len(vector) == 16
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-9)
    assert vectors[0] != vectors[1]
    # A single string input, a second request and the pure function all agree.
    again = json.loads(_post(url, {"model": "test-embed", "input": "red apple"})[2])
    assert again["data"][0]["embedding"] == vectors[0] == embed_text("red apple")


def test_records_and_reset(srv: OpenAIServer) -> None:
    srv.on("x", "rule")
    srv.inject("queued", "queued")
    _chat(srv, "x")
    [record] = srv.requests
    assert record["path"] == "/v1/chat/completions"
    assert record["body"]["messages"][0]["content"] == "x"
    assert record["headers"]["authorization"] == "Bearer x"
    assert isinstance(record["time"], float)
    srv.reset()
    assert srv.requests == [] and srv.count() == 0
    assert _content(_chat(srv, "x")[2]) == "yes"  # queue and rules are gone too


def test_max_concurrency_with_latency() -> None:
    # Each answer waits until all four requests are being handled: they must overlap, however
    # slowly the threads start.
    together = threading.Barrier(4, timeout=60)

    def answer_together(messages: list[dict[str, Any]]) -> str:
        together.wait()
        return "yes"

    with OpenAIServer(answer_together, latency=0.3) as srv:
        threads = [threading.Thread(target=lambda: _chat(srv, "q")) for _ in range(4)]
        start = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert srv.count() == 4
        assert srv.max_concurrency == 4
        assert time.monotonic() - start >= 0.3  # the latency was waited


def _listen_overflows() -> int | None:
    """The kernel's count of connections a listening socket's full queue turned away (Linux's
    `TcpExt: ListenOverflows`), or None where it is not exposed."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            counters = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(counters["ListenOverflows"]) if "ListenOverflows" in counters else None
    return None


@pytest.mark.skipif(_listen_overflows() is None, reason="the kernel's listen-queue counters are Linux's")
def test_a_burst_of_connections_all_wait_in_the_listening_queue() -> None:
    # 64 clients connecting at once, faster than the server accepts them: each must be queued.
    # With socketserver's queue of 5, the kernel dropped the rest and each client tried again
    # a second later, so a 16-connection client started a second late on some of its slots.
    with OpenAIServer() as srv:
        before = _listen_overflows()
        clients = [socket.socket() for _ in range(64)]
        try:
            for client in clients:
                client.setblocking(False)
                client.connect_ex((srv.host, srv.port))
            for client in clients:  # each handshake done, or refused and left to retry
                select.select([], [client], [], 5)
            assert _listen_overflows() == before
        finally:
            for client in clients:
                client.close()


def test_cli_prints_base_url_and_serves() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ragmatrix.testing.openai_server", "--port", "0", "--answer", "no"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        status, _, body = _post(f"{base_url}/chat/completions", {"model": "m", "messages": MESSAGES})
        assert status == 200 and _content(body) == "no"
    finally:
        process.terminate()
        assert process.wait(timeout=5) == 0


# -- through litellm ------------------------------------------------------------------------


def _litellm() -> Any:
    litellm = pytest.importorskip("litellm")
    litellm.suppress_debug_info = True
    return litellm


def _complete(litellm: Any, srv: OpenAIServer, **kwargs: Any) -> Any:
    kwargs.setdefault("num_retries", 0)
    kwargs.setdefault("max_retries", 0)
    return litellm.completion(
        model="openai/test-model",
        api_base=srv.base_url,
        api_key="x",
        messages=MESSAGES,
        **kwargs,
    )


def test_litellm_completion_and_embedding(srv: OpenAIServer) -> None:
    litellm = _litellm()
    srv.on("sky", "Blue, mostly.")
    response = _complete(litellm, srv)
    assert response.choices[0].message.content == "Blue, mostly."
    embedded = litellm.embedding(model="openai/test-embed", api_base=srv.base_url, api_key="x", input=["a", "b"])
    assert len(embedded.data) == 2
    assert all(len(item["embedding"]) == srv.embedding_dim for item in embedded.data)
    assert embedded.data[0]["embedding"] == embed_text("a")


def test_litellm_rate_limit_exposes_retry_after_and_is_not_retried(srv: OpenAIServer) -> None:
    litellm = _litellm()
    srv.inject(*[Reply.error(429, retry_after=1.5)] * 3)
    with pytest.raises(litellm.exceptions.RateLimitError) as caught:
        _complete(litellm, srv)
    error = caught.value
    assert error.status_code == 429
    # litellm rebuilds `error.response` without the server's headers; the real ones are here.
    assert error.litellm_response_headers["retry-after"] == "1.5"
    assert srv.count() == 1  # max_retries=0 stopped the OpenAI SDK's own retries


def test_litellm_default_sdk_retries_honour_retry_after(srv: OpenAIServer) -> None:
    litellm = _litellm()
    srv.inject(*[Reply.error(429, retry_after=0.1)] * 3)
    with pytest.raises(litellm.exceptions.RateLimitError):
        litellm.completion(model="openai/test-model", api_base=srv.base_url, api_key="x", messages=MESSAGES)
    times = [record["time"] for record in srv.requests]
    assert len(times) == 3  # the SDK's default of two retries
    assert all(later - earlier >= 0.09 for earlier, later in zip(times, times[1:], strict=False))


def test_litellm_embedding_ignores_max_retries_zero(srv: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    litellm = _litellm()
    # litellm's OpenAI embedding path does `max_retries or DEFAULT_MAX_RETRIES`, so 0 becomes 2;
    # only lowering the module default stops the retries.
    monkeypatch.setattr(litellm, "DEFAULT_MAX_RETRIES", 0)
    srv.inject(*[Reply.error(429, retry_after=0.1)] * 3)
    with pytest.raises(litellm.exceptions.RateLimitError) as caught:
        litellm.embedding(
            model="openai/test-embed",
            api_base=srv.base_url,
            api_key="x",
            input=["a"],
            max_retries=0,
        )
    assert caught.value.litellm_response_headers["retry-after"] == "0.1"
    assert srv.count("embeddings") == 1


def test_litellm_maps_faults_to_exceptions(srv: OpenAIServer) -> None:
    litellm = _litellm()
    exceptions = litellm.exceptions

    srv.inject(Reply.error(500))
    with pytest.raises(exceptions.InternalServerError) as caught:
        _complete(litellm, srv)
    assert caught.value.status_code == 500

    srv.inject(Reply.error(503))
    with pytest.raises(exceptions.ServiceUnavailableError) as caught_503:
        _complete(litellm, srv)
    assert caught_503.value.status_code == 503

    # A 200 with a non-JSON body is reported as a (synthetic) 500.
    srv.inject(Reply.garbage())
    with pytest.raises(exceptions.InternalServerError) as caught_garbage:
        _complete(litellm, srv)
    assert caught_garbage.value.status_code == 500
    assert "invalid response" in str(caught_garbage.value)

    # Empty choices and null content are not errors to litellm: callers must check.
    srv.inject(Reply.empty_choices(), Reply.null_content())
    assert _complete(litellm, srv).choices == []
    assert _complete(litellm, srv).choices[0].message.content is None

    srv.inject(Reply.hang(60))  # then it would answer: only a timeout ends the call first
    with pytest.raises(exceptions.Timeout) as caught_timeout:
        _complete(litellm, srv, timeout=0.5)
    assert caught_timeout.value.status_code == 408
    assert srv.count() == 6

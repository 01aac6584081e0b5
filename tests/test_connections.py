"""The direct route's connections (`ragmatrix.models.connections`) against a server on
127.0.0.1 that answers with scripted bytes: kept open between requests, closed after anything
unclean, bodies as servers frame them (length, chunks, until close, compressed), a cut at the
limit, at most `limit` at once. Each test runs on asyncio's loop and on uvloop's, which a run
uses where it is installed (`ragmatrix.foundations.context.new_loop`)."""

from __future__ import annotations

import asyncio
import gzip
import ssl
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from project import localhost_certificate

from ragmatrix.models import http
from ragmatrix.models.connections import ConnectionLost, ConnectionPool

T = TypeVar("T")
JSON = {"Content-Type": "application/json"}
Reply = Callable[[int], bytes | None]  # the request's number -> the bytes to answer (None: hang up)


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def loop_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The loop each test's coroutines run on (`run`)."""
    if request.param == "uvloop":
        monkeypatch.setattr(Loops, "new", pytest.importorskip("uvloop").new_event_loop)
    return str(request.param)


class Loops:
    new: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`coroutine` run to its end on a new loop of the test's kind."""
    with asyncio.Runner(loop_factory=Loops.new) as runner:
        return runner.run(coroutine)


def framed(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class ScriptedServer:
    """Reads each request whole (its head and Content-Length body) and answers what `reply`
    says; counts connections, requests and the most connections open at once."""

    def __init__(
        self, reply: Reply, delay: float = 0.0, hang_up_after: tuple[int, ...] = (), tls: ssl.SSLContext | None = None
    ) -> None:
        self.reply = reply
        self.tls = tls
        self.hang_up_after = hang_up_after
        self.delay = delay
        self.connections = self.requests = self.open = self.most_open = 0
        self.targets: list[str] = []
        self.heads: list[str] = []

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        port = self._server.sockets[0].getsockname()[1]
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/v1"

    async def __aexit__(self, *_: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
                    return  # the client hung up, or the test is over
                length = next(
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                self.targets.append(head.split(" ")[1])
                self.heads.append(head)
                if self.delay:
                    await asyncio.sleep(self.delay)
                answer = self.reply(self.requests)
                if answer is None:
                    return
                writer.write(answer)
                await writer.drain()
                framed_body = b"Content-Length" in answer or b"chunked" in answer
                if self.requests in self.hang_up_after or b"Connection: close" in answer or not framed_body:
                    return  # as asked, or the body runs until the connection closes
        finally:
            self.open -= 1
            writer.close()


def asked(reply: Reply, *requests: int, limit: int | None = None, connections: int = 4, hang_up_after=()):
    """POSTs through one pool, each number in `requests` a group sent at once, the groups one
    after another; the answers (or errors) in order, and the server."""

    async def go() -> tuple[list[object], ScriptedServer]:
        server = ScriptedServer(reply, hang_up_after=hang_up_after)
        results: list[object] = []
        async with server as base:
            pool = ConnectionPool(base, connections)
            for group in requests:
                sent = (pool.post(base + "/chat/completions?x=1", b"{}", JSON, limit) for _ in range(group))
                results += await asyncio.gather(*sent, return_exceptions=True)
            await pool.close()
        return results, server

    return run(go())


def test_each_test_runs_on_the_loop_of_its_kind(loop_kind):
    async def running() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    assert type(run(running())).__module__.partition(".")[0] == loop_kind


def test_a_connection_is_kept_open_for_the_next_request():
    answers, server = asked(lambda n: framed(f"answer {n}".encode()), 1, 1, 1)
    assert [a.body for a in answers] == [b"answer 1", b"answer 2", b"answer 3"]  # type: ignore[attr-defined]
    assert (server.connections, server.requests) == (1, 3)
    assert server.targets == ["/v1/chat/completions?x=1"] * 3
    assert "Host: 127.0.0.1:" in server.heads[0] and "Content-Type: application/json" in server.heads[0]


def test_bodies_in_chunks_compressed_or_running_until_the_server_closes_are_read_whole():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    packed = gzip.compress(b"unpacked")
    replies = {1: chunked, 2: framed(packed, "Content-Encoding: gzip"), 3: b"HTTP/1.1 200 OK\r\n\r\nto the end"}
    answers, server = asked(lambda n: replies[n] if n in replies else framed(b"after"), 1, 1, 1, 1)
    assert [a.body for a in answers] == [b"hello world", b"unpacked", b"to the end", b"after"]  # type: ignore[attr-defined]
    assert server.connections == 2  # a body that ends with the connection takes it along


def test_a_connection_the_server_closed_while_idle_is_not_used_again():
    replies = {1: framed(b"one", "Connection: close")}
    answers, server = asked(lambda n: replies.get(n, framed(b"two")), 1, 1)
    assert [a.body for a in answers] == [b"one", b"two"]  # type: ignore[attr-defined]
    assert server.connections == 2


def test_an_answer_that_is_not_http_or_ends_early_is_a_lost_connection_and_retried():
    answers, _ = asked(
        lambda n: b"SMTP ready\r\n\r\n" if n == 1 else framed(b"0123456789")[:-4], 1, 1, hang_up_after=(2,)
    )
    assert all(isinstance(a, ConnectionLost) for a in answers), answers
    failures = [http.classify(a) for a in answers]  # type: ignore[arg-type]
    assert all(f.retryable and f.message.startswith("APIConnectionError") for f in failures), failures


def test_a_refused_connection_is_retried_as_the_server_may_come_back():
    async def go() -> BaseException:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        try:
            await ConnectionPool(f"http://127.0.0.1:{port}", 1).post(f"http://127.0.0.1:{port}/x", b"{}", {})
        except OSError as error:
            return error
        raise AssertionError("answered")

    failure = http.classify(run(go()))
    assert failure.retryable and failure.message.startswith("APIConnectionError"), failure


def test_a_long_body_is_cut_one_byte_past_the_limit_and_its_connection_closed():
    answers, server = asked(lambda n: framed(b"x" * 100_000), 1, 1, limit=1000)
    assert [len(a.body) for a in answers] == [1001, 1001]  # type: ignore[attr-defined]
    assert not any(a.complete for a in answers)  # type: ignore[attr-defined]
    assert server.connections == 2


def test_a_cancelled_request_closes_its_connection_and_the_next_one_opens_another():
    async def go() -> tuple[list[bytes], ScriptedServer]:
        server = ScriptedServer(lambda n: framed(b"late" if n == 1 else b"on time"), delay=0.0)
        async with server as base:
            pool = ConnectionPool(base, 1)
            server.delay = 30.0
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(pool.post(base + "/x", b"{}", {}), 0.2)
            server.delay = 0.0
            answer = await pool.post(base + "/x", b"{}", {})
            await pool.close()
        return [answer.body], server

    bodies, server = run(go())
    assert bodies == [b"on time"]
    assert server.connections == 2


def test_at_most_limit_connections_are_open_at_once():
    answers, server = asked(lambda n: framed(b"ok"), 8, connections=2)
    assert [a.body for a in answers] == [b"ok"] * 8  # type: ignore[attr-defined]
    assert server.most_open == 2 and server.connections == 2


def test_an_error_status_carries_the_servers_message_and_retry_after(monkeypatch):
    for name in http.PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    body = b'{"error": {"message": "slow down"}}'

    async def go() -> BaseException:
        server = ScriptedServer(lambda n: framed(body, "Retry-After: 3", status="429 Too Many Requests"))
        async with server as base:
            session = http.HttpSession(base, connections=2)
            try:
                await session.post(base + "/chat/completions", b"{}")
            except http.StatusError as error:
                return error
            finally:
                for pool in session._pools.values():
                    await pool.close()
        raise AssertionError("answered")

    error = run(go())
    failure = http.classify(error)
    assert failure.message == "HTTP 429 RateLimitError: slow down" and failure.retry_after == 3.0, failure


def test_a_line_break_in_a_header_value_adds_no_header():
    async def go() -> ScriptedServer:
        server = ScriptedServer(lambda n: framed(b"ok"))
        async with server as base:
            pool = ConnectionPool(base, 1)
            await pool.post(base + "/x", b"{}", {"Authorization": "Bearer key\r\nX-Injected: yes"})
            await pool.close()
        return server

    head = run(go()).heads[0]
    assert "Authorization: Bearer keyX-Injected: yes\r\n" in head
    assert "\r\nX-Injected" not in head


def test_an_informational_answer_is_read_past():
    answers, server = asked(lambda n: b"HTTP/1.1 100 Continue\r\n\r\n" + framed(b"the answer"), 1, 1)
    assert [(a.status, a.body) for a in answers] == [(200, b"the answer")] * 2  # type: ignore[attr-defined]
    assert server.connections == 1


def test_an_https_server_is_asked_over_tls_and_a_certificate_no_one_trusts_is_refused(tmp_path, monkeypatch):
    """The certificates trusted are SSL_CERT_FILE's (else certifi's), as litellm's client trusts."""
    key, cert = localhost_certificate(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    for name in http.PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)

    async def ask() -> bytes | BaseException:
        async with ScriptedServer(lambda n: framed(b"over tls"), tls=served) as base:
            session = http.HttpSession(base, connections=1)
            try:
                return await session.post(base + "/chat/completions", b"{}")
            except Exception as error:
                return error
            finally:
                for pool in session._pools.values():
                    await pool.close()

    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert run(ask()) == b"over tls"
    monkeypatch.delenv("SSL_CERT_FILE")
    refused = run(ask())
    assert isinstance(refused, ssl.SSLCertVerificationError), refused
    assert http.classify(refused).message.startswith("APIConnectionError"), http.classify(refused)

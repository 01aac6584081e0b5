"""A small, real OpenAI-compatible HTTP server for tests and perf scripts.

The suite talks to models through litellm, which talks HTTP. Rather than mocking either,
tests start this server on an ephemeral localhost port and point `api_base` at it. The
server answers chat completions and embeddings in OpenAI's wire format, and reranking in
Cohere's (`POST /v1/rerank`: `{"model", "query", "documents", "top_n"}` answered by
`{"results": [{"index", "relevance_score"}], "meta": {"billed_units": {"search_units": 1}}}`,
scores from `rerank_scores` or, by default, `rerank_text`), and can be scripted
to misbehave (HTTP errors, hangs, non-JSON bodies, empty choices, null content, connection
resets, an outage of some seconds, a rate limit, an answer that repeats the request's key, an
answer of many megabytes), and can serve one request at a time, as a busy single server does, so
the error handling of the real client stack is exercised end to end. With `launches` on it also
speaks the part of Xinference's API that launches, lists, describes and terminates models, so
that `xinference-client` finds and launches models on it.

    with OpenAIServer(answer="yes") as srv:
        srv.inject(Reply.error(429, retry_after=1))
        srv.on("capital of France", "Paris")
        srv.usage = {"prompt_tokens": 10, "completion_tokens": 2}  # or None: no usage at all
        # The first call gets the 429; a second call about France gets "Paris".
        srv.outage(3)         # every request gets a 500 for the next 3 seconds, then all is well
        srv.rate_limit(5)     # at most 5 requests a second; the others get a 429 with Retry-After
        srv.rate_limit(5, retry_after=False)  # ... a 429 that does not say when to come back
        srv.one_at_a_time = True  # requests queue and are answered one after another
        srv.launches = True   # POST /v1/models launches a model, DELETE terminates it (Xinference)
        srv.gather(4)         # answers wait until 4 requests have arrived: they overlap on any machine
        ... litellm.completion(model="openai/m", api_base=srv.base_url, api_key="x", ...)
        assert srv.count() == 2  # chat requests seen, retries included

Run it standalone for subprocess tests and perf scripts:

    python -m ragmatrix.testing.openai_server --port 0 --latency 0.1 --answer yes
    python -m ragmatrix.testing.openai_server --outage 3 --rate-limit 5
    python -m ragmatrix.testing.openai_server --latency 1 --one-at-a-time

Standard library only, so it works before any optional dependency is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Literal, cast

__all__ = ["Answer", "OpenAIServer", "Reply", "embed_text", "rerank_text"]

# A constant answer, or a function of the chat messages.
Answer = str | Callable[[list[dict[str, Any]]], str]
# The token counts a chat answer reports: counted in words ("words"), given, or none at all.
Usage = Literal["words"] | dict[str, int] | None

ReplyKind = Literal[
    "text", "error", "hang", "garbage", "empty_choices", "null_content", "echo_key", "echo_key_answer", "reset", "long"
]

# The launch settings Xinference's description of a running model holds (the others, such as
# n_threads, it does not report).
REPORTED_SETTINGS = ("model_engine", "model_format", "model_size_in_billions", "quantization", "replica")
# Xinference's endpoints: never given a scripted fault
MODEL_API = ("launch", "describe", "terminate", "instances", "cluster")

# Error `type`/`code` pairs in the shape OpenAI uses, so client-side mapping sees familiar values.
_ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "bad_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "model_not_found"),
    408: ("timeout_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}


@dataclass(frozen=True)
class Reply:
    """One scripted response. Build it with the class methods, not the constructor."""

    kind: ReplyKind
    content: str | None = None
    status: int = 200
    retry_after: float | None = None
    message: str = ""
    delay: float = 0.0
    body: str = ""
    size: int = 0

    @classmethod
    def text(cls, content: str) -> Reply:
        """A normal answer with `content` (on the embeddings endpoint: normal vectors)."""
        return cls(kind="text", content=content)

    @classmethod
    def error(
        cls, status: int, retry_after: float | None = None, message: str = "scripted error", delay: float = 0.0
    ) -> Reply:
        """An OpenAI-style error body with HTTP `status`, plus `Retry-After` when given, sent
        after `delay` seconds."""
        return cls(kind="error", status=status, retry_after=retry_after, message=message, delay=delay)

    @classmethod
    def echo_key(cls, status: int = 401) -> Reply:
        """An error whose message repeats the request's API key, as some servers do: the
        client must keep it out of everything it stores or shows."""
        return cls(kind="echo_key", status=status)

    @classmethod
    def echo_key_answer(cls) -> Reply:
        """HTTP 200 whose answer text repeats the request's API key, as a proxy or a model that
        echoes its input might: the key must never be stored, cached or shown."""
        return cls(kind="echo_key_answer")

    @classmethod
    def reset(cls) -> Reply:
        """No answer: the connection is reset (TCP RST), as by a crashing server or a proxy."""
        return cls(kind="reset")

    @classmethod
    def hang(cls, seconds: float) -> Reply:
        """Sleep `seconds`, then answer as if nothing had been scripted (rules, then default)."""
        return cls(kind="hang", delay=seconds)

    @classmethod
    def garbage(cls, body: str = "<html>not json</html>") -> Reply:
        """HTTP 200 whose body is not JSON (a proxy error page, say)."""
        return cls(kind="garbage", body=body)

    @classmethod
    def long_answer(cls, size: int) -> Reply:
        """HTTP 200 with a chat answer of `size` bytes ("yes yes ..."), streamed in pieces, never
        built whole; `OpenAIServer.bytes_sent` says how much of it left before the client hung up."""
        return cls(kind="long", size=size)

    @classmethod
    def empty_choices(cls) -> Reply:
        """HTTP 200, valid JSON, but `"choices": []` (embeddings: `"data": []`)."""
        return cls(kind="empty_choices")

    @classmethod
    def null_content(cls) -> Reply:
        """HTTP 200 with one choice whose message content is null."""
        return cls(kind="null_content")


def _as_reply(reply: Reply | str) -> Reply:
    # Plain strings are accepted as shorthand for Reply.text, which keeps scripts short.
    return reply if isinstance(reply, Reply) else Reply.text(reply)


def _format_seconds(value: float) -> str:
    # "2" rather than "2.0" for whole seconds: HTTP's delay-seconds is an integer, and clients
    # that parse only integers still understand it; fractions are kept for those that do more.
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _message_text(message: dict[str, Any]) -> str:
    """The text of one chat message; content may be a string or a list of typed parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(p for p in parts if isinstance(p, str))
    return ""


def _chat_messages(body: Any) -> list[dict[str, Any]]:
    raw = body.get("messages") if isinstance(body, dict) else None
    return [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []


def _embedding_texts(body: Any) -> list[dict[str, Any]]:
    """An embeddings request's texts, shaped as messages, for the rules to match."""
    raw = body.get("input") if isinstance(body, dict) else None
    texts = raw if isinstance(raw, list) else [raw]
    return [{"role": "user", "content": text} for text in texts if isinstance(text, str)]


def _word_count(text: str) -> int:
    # Rough token counts are enough: callers only check that usage is present and plausible.
    return len(text.split())


def embed_text(text: str, dim: int = 16) -> list[float]:
    """A deterministic unit vector for `text`: a signed, hashed bag of lower-cased words.

    blake2b rather than hash(), because hash() of str is salted per process and vectors must
    be identical across runs and across the CLI subprocess and the test process.
    """
    vector = [0.0] * dim
    for word in text.lower().split():
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dim
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        # Empty text (or words whose signs cancelled): still return a unit vector, because
        # cosine similarity on a zero vector is undefined and would crash callers.
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]


def rerank_text(query: str, documents: list[str]) -> list[float]:
    """Deterministic relevances: the cosine of each document's `embed_text` vector to the
    query's, mapped to [0, 1]."""
    wanted = embed_text(query)
    return [(1.0 + sum(a * b for a, b in zip(wanted, embed_text(d), strict=True))) / 2.0 for d in documents]


# Relevances for one rerank request: a function of the query and the documents' texts.
RerankScores = Callable[[str, list[str]], list[float]]


class _Stopped(Exception):
    """Raised in a handler woken from a sleep by stop(): it must not answer any more."""


class _Reset(Exception):
    """Raised in a handler whose connection was reset on purpose: nothing more to send."""


class _Rule:
    """Replies for chat requests containing `needle`; the last reply repeats forever."""

    def __init__(self, needle: str, replies: Sequence[Reply]) -> None:
        self.needle = needle
        self.replies = list(replies)
        self.used = 0

    def next_reply(self) -> Reply:
        reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        return reply


class _HTTPServer(ThreadingHTTPServer):
    # Daemon handler threads: a handler sleeping in a hang must never keep stop() or the
    # interpreter waiting. block_on_close=False makes server_close() not join them either.
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    # Connections the kernel queues until they are accepted, as a real server's (uvicorn's
    # 2048): socketserver's 5 turned the rest of a burst away, and a client opening 16 at once
    # had some of them join a second later, when the kernel tried them again.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], owner: OpenAIServer) -> None:
        self.owner = owner
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keep-alive, like real OpenAI endpoints; every response sets Content-Length.
    protocol_version = "HTTP/1.1"
    server_version = "ragmatrix-openai-test/1.0"

    @property
    def owner(self) -> OpenAIServer:
        return cast(_HTTPServer, self.server).owner

    def setup(self) -> None:
        super().setup()
        self.owner._track_connection(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner._track_connection(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        # Silence per-request stderr noise; srv.requests is the record tests look at.
        return

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        try:
            self.owner._handle(self, method)
        except (OSError, _Stopped, _Reset):
            # The client gave up (timeout after a hang), the server is stopping, or a reset
            # was scripted: end this connection without an answer, as a dying server would.
            self.close_connection = True

    def send_payload(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        answered = getattr(self, "answered", None)
        if answered is not None:
            answered()  # no longer in flight: a client may send its next request once it reads this
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


class OpenAIServer:
    """A scripted OpenAI-compatible server on 127.0.0.1, serving from a daemon thread.

    Per request, the response is decided by, in order: an outage (`outage`, chat, embeddings
    and rerank), the rate limit (`rate_limit`, likewise), the fault queue (`inject`, consumed one
    reply per request on any endpoint), then rules (`on`, chat only), then `answer` (chat) or
    `rerank_scores` (rerank).
    """

    def __init__(
        self,
        answer: Answer = "yes",
        *,
        latency: float = 0.0,
        latency_per_input: float = 0.0,
        usage: Usage = "words",
        embedding_dim: int = 16,
        models: Iterable[str] = ("test-model", "test-embed"),
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.answer: Answer = answer
        # What the outage and the rate limit measure their seconds with; a test may pass a clock
        # it moves itself, so that what it checks does not depend on how fast the machine is.
        self.clock = clock
        self.latency: float = latency
        self.latency_per_input: float = latency_per_input  # more per text of an embeddings request
        self.rerank_scores: RerankScores = rerank_text
        self.usage: Usage = usage
        self.embedding_dim: int = embedding_dim
        self.host = host
        self._requested_port = port
        self._models: list[str] = list(dict.fromkeys(models))
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._queue: deque[Reply] = deque()
        self._rules: list[_Rule] = []
        self._in_flight = 0
        self._max_concurrency = 0
        self._connections: set[socket.socket] = set()
        self._outage: tuple[float, Reply, float | None] | None = None  # (seconds, reply, since when)
        self._per_second: int | None = None  # the rate limit
        self._limit_says_when = True  # whether its 429s carry a Retry-After
        self._accepted: deque[float] = deque()  # arrival times of the requests the limit let in
        self._rate_limited = 0
        # One at a time: requests are answered in the order they came, each after the one before.
        self.one_at_a_time = False
        self._turns = threading.Condition()
        self._next_ticket = 0
        self._turn = 0
        self._bytes_sent = 0
        # Xinference's model API: the models launched, by uid, as the server describes them.
        self.launches = False
        self.reported_settings = frozenset(REPORTED_SETTINGS)  # the launch settings a description holds
        self.worker = "127.0.0.1:40001"  # the worker address a description names
        self.refuse_launches: str | None = None  # a launch's error detail, or None: launches go
        self._launched: dict[str, dict[str, Any]] = {}
        self._uids: set[str] = set()  # every uid ever launched
        self._gather: int | None = None  # answers wait until this many requests have arrived
        self._patience = 60.0  # ... or this many seconds have passed
        self._arrived = 0  # chat and embeddings requests since `gather` was set
        self._arrival = threading.Condition(self._lock)
        # Set by stop(): wakes handlers sleeping in latency or a hang so they end promptly.
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> OpenAIServer:
        if self._httpd is not None:
            raise RuntimeError("OpenAIServer already started")
        if self._stopping.is_set():
            raise RuntimeError("OpenAIServer cannot be restarted; create a new one")
        self._httpd = _HTTPServer((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"openai-test-server:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; never waits for handlers (even ones in a hang). Idempotent."""
        httpd = self._httpd
        if httpd is None or self._stopping.is_set():
            self._stopping.set()
            return
        self._stopping.set()
        httpd.shutdown()  # returns once serve_forever's loop has exited
        with self._lock:
            open_connections = list(self._connections)
        for conn in open_connections:
            # Kept-alive client connections would otherwise still be served after stop().
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("OpenAIServer not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to pass as `api_base`, e.g. http://127.0.0.1:54321/v1."""
        return f"http://{self.host}:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------

    def inject(self, *replies: Reply | str) -> None:
        """Queue replies served one per request (any endpoint, FIFO) before anything else."""
        with self._lock:
            self._queue.extend(_as_reply(r) for r in replies)

    def on(self, substring: str, *replies: Reply | str) -> None:
        """For chat requests mentioning `substring` (or embeddings requests one of whose texts
        holds it), serve `replies` in order, then the last one again and again. Earlier rules win
        when several match."""
        if not replies:
            raise ValueError("on() needs at least one reply")
        with self._lock:
            self._rules.append(_Rule(substring, [_as_reply(r) for r in replies]))

    def outage(self, seconds: float, reply: Reply | None = None, *, from_first_request: bool = False) -> None:
        """For `seconds` from now (or from the next chat, embeddings or rerank request), answer
        every such request with `reply` (default: a 500), whatever else is scripted;
        then serve as before. The models list keeps answering, as a server whose workers are
        down usually does."""
        with self._lock:
            reply = reply or Reply.error(500, message="scripted outage")
            self._outage = (seconds, reply, None if from_first_request else self.clock())

    def rate_limit(self, per_second: int | None, retry_after: bool = True) -> None:
        """Let at most `per_second` chat, embeddings and rerank requests in within any one second;
        the others get a 429 whose Retry-After says when the next place frees (with
        `retry_after`; without, a bare 429). None: no limit."""
        with self._lock:
            self._per_second = per_second
            self._limit_says_when = retry_after
            self._accepted.clear()

    def gather(self, requests: int | None, patience: float = 60.0) -> None:
        """Hold every chat and embeddings answer until `requests` of them have arrived from now
        on (or `patience` seconds have passed), then answer as scripted: requests sent together
        are then all being handled at once, however slowly the machine sends them, so a test of
        concurrency needs no latency long enough to make them overlap. None: no holding."""
        with self._lock:
            self._gather, self._arrived, self._patience = requests, 0, patience

    @property
    def rate_limited(self) -> int:
        """How many requests the rate limit refused."""
        with self._lock:
            return self._rate_limited

    def reset(self) -> None:
        """Forget recorded requests, queued faults, rules, the outage, the rate limit and the
        concurrency high-water mark (one at a time stays as it is)."""
        with self._lock:
            self._records.clear()
            self._queue.clear()
            self._rules.clear()
            self._outage = None
            self._per_second = None
            self._limit_says_when = True
            self._accepted.clear()
            self._rate_limited = 0
            self._gather = None
            self._max_concurrency = self._in_flight

    # -- bookkeeping -----------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Snapshot of the records {"path", "body", "headers", "time"}, oldest first."""
        with self._lock:
            return list(self._records)

    def count(self, path_suffix: str = "chat/completions") -> int:
        """How many recorded requests have a path ending in `path_suffix`."""
        with self._lock:
            return sum(1 for r in self._records if r["path"].endswith(path_suffix))

    @property
    def launched(self) -> dict[str, dict[str, Any]]:
        """The models launched on the server (`launches`) and not terminated, by uid."""
        with self._lock:
            return {uid: dict(info) for uid, info in self._launched.items()}

    def launch(self, uid: str, model_name: str, model_type: str = "embedding", **settings: Any) -> None:
        """A model running on the server before the client comes, launched by someone else."""
        with self._lock:
            self._launched[uid] = self._described(uid, model_name, model_type, settings)
            self._uids.add(uid)

    def _described(self, uid: str, name: str, model_type: str, settings: dict[str, Any]) -> dict[str, Any]:
        reported = {k: v for k, v in settings.items() if k in self.reported_settings and v is not None}
        about = {"address": self.worker, "accelerators": [], "model_engine": "test-engine"}
        return {"id": uid, "model_name": name, "model_type": model_type, **about, **reported}

    @property
    def bytes_sent(self) -> int:
        """Bytes of long answers (`Reply.long_answer`) that reached the connection."""
        with self._lock:
            return self._bytes_sent

    @property
    def max_concurrency(self) -> int:
        """The most requests that were being handled at the same moment."""
        with self._lock:
            return self._max_concurrency

    @property
    def models(self) -> list[str]:
        with self._lock:
            return list(self._models)

    # -- request handling (runs in handler threads) ----------------------------------------

    def _sleep(self, seconds: float) -> None:
        # An Event wait rather than time.sleep, so stop() cuts latency and hangs short.
        if self._stopping.wait(seconds):
            raise _Stopped

    def _track_connection(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _handle(self, h: _Handler, method: str) -> None:
        path = h.path.split("?", 1)[0]
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                body = None

        route = path.rstrip("/")
        if route.startswith("/v1/") or route == "/v1":
            route = route[3:]
        endpoint = {
            ("POST", "/chat/completions"): "chat",
            ("POST", "/embeddings"): "embeddings",
            ("POST", "/rerank"): "rerank",
            ("GET", "/models"): "models",
        }.get((method, route))
        if self.launches and route == "/models":
            endpoint = {"POST": "launch", "GET": "models"}.get(method)
        elif self.launches and route in ("/models/instances", "/cluster/info"):
            endpoint = "instances" if route == "/models/instances" and method == "GET" else "cluster"
        elif self.launches and route.startswith("/models/"):
            endpoint = {"GET": "describe", "DELETE": "terminate"}.get(method)

        with self._lock:
            self._records.append(
                {
                    "path": path,
                    "body": body,
                    "headers": {k.lower(): v for k, v in h.headers.items()},
                    "time": time.time(),
                }
            )
            self._in_flight += 1
            self._max_concurrency = max(self._max_concurrency, self._in_flight)
            # Take the fault at arrival, so FIFO order follows request order, not finish order.
            fault = self._arrival_fault(endpoint)
            if fault is None:
                scripted = endpoint is not None and endpoint not in MODEL_API
                fault = self._queue.popleft() if scripted and self._queue else None
            if isinstance(body, dict) and isinstance(body.get("model"), str):
                # a launched model is listed as launched, and not at all once terminated
                if body["model"] not in self._models and body["model"] not in self._uids:
                    self._models.append(body["model"])
            if endpoint in ("chat", "embeddings"):
                self._arrived += 1
                self._arrival.notify_all()
                self._wait_for_the_gathering()
            ticket = self._take_ticket() if self.one_at_a_time and endpoint in ("chat", "embeddings") else None
        counted = [True]

        def answered() -> None:
            # once, as the reply starts: counted after it is written, the client that read it
            # could already have sent its next request, and the two would seem to overlap
            with self._lock:
                if counted[0]:
                    counted[0] = False
                    self._in_flight -= 1

        h.answered = answered  # type: ignore[attr-defined]
        try:
            if ticket is not None:
                self._await_turn(ticket)
            if self.latency > 0:
                self._sleep(self.latency)
            self._respond(h, endpoint, body, fault)
        finally:
            if ticket is not None:
                self._end_turn()
            answered()

    def _wait_for_the_gathering(self) -> None:
        """Until `gather`'s count of requests has arrived (lock held; waiting releases it)."""
        deadline = time.monotonic() + self._patience
        while self._gather is not None and self._arrived < self._gather and not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._arrival.wait(min(left, 0.1))

    def _take_ticket(self) -> int:
        with self._turns:
            ticket, self._next_ticket = self._next_ticket, self._next_ticket + 1
            return ticket

    def _await_turn(self, ticket: int) -> None:
        # The requests before it are served first, whether or not their clients still wait:
        # a busy server computes what it was asked, as a real one does.
        with self._turns:
            while self._turn != ticket:
                if self._stopping.is_set():
                    self._turn = max(self._turn, ticket)  # the turns after it must not wait for it
                    raise _Stopped
                self._turns.wait(0.05)

    def _end_turn(self) -> None:
        with self._turns:
            self._turn += 1
            self._turns.notify_all()

    def _arrival_fault(self, endpoint: str | None) -> Reply | None:
        """The outage's reply, or the rate limit's 429, for a request arriving now (lock held)."""
        if endpoint not in ("chat", "embeddings", "rerank"):
            return None
        now = self.clock()
        if self._outage is not None:
            seconds, reply, since = self._outage
            if since is None:  # it starts with this request
                since = now
                self._outage = (seconds, reply, since)
            if now < since + seconds:
                return reply
            self._outage = None
        if self._per_second is not None:
            while self._accepted and self._accepted[0] <= now - 1.0:
                self._accepted.popleft()
            if len(self._accepted) >= self._per_second:
                self._rate_limited += 1
                # Rounded up: a client that waits exactly this long must find the place free.
                wait = max(0.01, math.ceil((self._accepted[0] + 1.0 - now) * 100) / 100)
                said = wait if self._limit_says_when else None
                return Reply.error(429, retry_after=said, message="rate limit: too many requests per second")
            self._accepted.append(now)
        return None

    def _respond(self, h: _Handler, endpoint: str | None, body: Any, fault: Reply | None) -> None:
        if endpoint is None:
            self._send_error(h, 404, f"no route for {h.command} {h.path}")
            return
        if endpoint in MODEL_API:
            self._model_api(h, endpoint, body)
            return
        messages = _chat_messages(body) if endpoint == "chat" else _embedding_texts(body)
        reply = fault if fault is not None else self._match_rule(messages)
        if reply is not None and reply.kind == "hang":
            self._sleep(reply.delay)
            # Then answer normally: a queued hang gives way to the rules, a rule's hang to the
            # default answer (re-matching would just hang again on a repeating rule).
            reply = self._match_rule(messages) if fault is not None else None
            if reply is not None and reply.kind == "hang":
                self._sleep(reply.delay)
                reply = None
        if reply is not None and reply.kind == "error":
            if reply.delay:
                self._sleep(reply.delay)
            self._send_error(h, reply.status, reply.message, reply.retry_after)
            return
        if reply is not None and reply.kind == "echo_key":
            key = h.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            self._send_error(h, reply.status, f"Incorrect API key provided: {key}.")
            return
        if reply is not None and reply.kind == "reset":
            # SO_LINGER with a zero timeout: closing sends a RST instead of an orderly FIN
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
            raise _Reset
        if reply is not None and reply.kind == "garbage":
            h.send_payload(200, reply.body.encode("utf-8"), content_type="text/html")
            return
        if reply is not None and reply.kind == "long" and endpoint == "chat":
            self._send_long(h, body, reply.size)
            return
        if endpoint == "models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "ragmatrix"} for m in self.models]
            data += [{**info, "object": "model"} for info in self.launched.values()]
            self._send_json(h, {"object": "list", "data": data})
            return
        if not isinstance(body, dict):
            self._send_error(h, 400, "request body must be a JSON object")
            return
        if endpoint == "embeddings":
            empty = reply is not None and reply.kind == "empty_choices"
            self._send_embeddings(h, body, empty=empty)
            return
        if endpoint == "rerank":
            self._send_rerank(h, body, empty=reply is not None and reply.kind == "empty_choices")
            return
        self._send_chat(h, body, messages, reply)

    def _send_chat(
        self,
        h: _Handler,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        reply: Reply | None,
    ) -> None:
        content: str | None
        if reply is None:
            answer = self.answer
            content = answer if isinstance(answer, str) else answer(messages)
        elif reply.kind == "text":
            content = reply.content
        elif reply.kind == "echo_key_answer":
            key = h.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            content = f"yes (you called me with the key {key})"
        else:  # empty_choices / null_content
            content = None

        if reply is not None and reply.kind == "empty_choices":
            choices: list[dict[str, Any]] = []
        else:
            choices = [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ]
        payload: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "test-model",
            "choices": choices,
        }
        usage = self.usage
        if usage is not None:
            if usage == "words":
                prompt_tokens = sum(_word_count(_message_text(m)) for m in messages)
                completion_tokens = _word_count(content or "")
            else:
                prompt_tokens, completion_tokens = usage["prompt_tokens"], usage["completion_tokens"]
            payload["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        self._send_json(h, payload)

    def _model_api(self, h: _Handler, endpoint: str, body: Any) -> None:
        """Xinference's launch (POST /v1/models), describe (GET /v1/models/<uid>) and terminate
        (DELETE /v1/models/<uid>), with its `detail` error bodies."""
        path, _, query = h.path.partition("?")
        uid = path.rstrip("/").rsplit("/", 1)[-1]
        if endpoint == "instances":
            uid = query.partition("model_uid=")[2].partition("&")[0]
            replicas = [{"replica_id": 0, "worker_address": self.worker, "status": "READY"}]
            self._send_list(h, [{"model_uid": uid, "replica_statuses": replicas}] if uid in self.launched else [])
            return
        if endpoint == "cluster":
            node = {"node_type": "Worker", "ip_address": self.worker, "cpu_count": 2, "gpu_count": 0}
            self._send_list(h, [{**node, "mem_total": 8 * 2**30, "gpu_vram_total": 0}])
            return
        if endpoint == "launch":
            settings = dict(body) if isinstance(body, dict) else {}
            uid = str(settings.pop("model_uid", None) or uuid.uuid4().hex[:8])
            name, model_type = settings.pop("model_name", None), settings.pop("model_type", "LLM")
            # Replies are sent outside the lock: sending one takes it (the request stops counting
            # as in flight).
            with self._lock:
                refused = self.refuse_launches
                if refused is None and uid in self._launched:
                    refused = f"Model {uid} is already in the model list"
                if refused is None:
                    self._launched[uid] = self._described(uid, str(name), str(model_type), settings)
                    self._uids.add(uid)
            if refused is not None:
                h.send_payload(400, json.dumps({"detail": refused}).encode())
                return
            self._send_json(h, {"model_uid": uid})
            return
        with self._lock:
            info = self._launched.pop(uid, None) if endpoint == "terminate" else self._launched.get(uid)
        if info is None:
            h.send_payload(400, json.dumps({"detail": f"Model not found, uid: {uid}"}).encode())
            return
        self._send_json(h, info if endpoint == "describe" else {})

    @staticmethod
    def _send_list(h: _Handler, items: list[dict[str, Any]]) -> None:
        h.send_payload(200, json.dumps(items).encode("utf-8"))

    def _send_long(self, h: _Handler, body: Any, size: int) -> None:
        model = body.get("model") if isinstance(body, dict) else None
        head = json.dumps({"id": "chatcmpl-long", "object": "chat.completion", "created": 0, "model": model or "m"})
        start = (head[:-1] + ', "choices": [{"index": 0, "message": {"role": "assistant", "content": "').encode()
        end = b'"}, "finish_reason": "length"}]}'
        piece = b"yes " * (16 * 1024)
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(start) + size + len(end)))
        h.end_headers()
        h.wfile.write(start)
        left = size
        while left > 0:  # an OSError here (the client hung up) ends the connection
            chunk = piece[:left]
            h.wfile.write(chunk)
            left -= len(chunk)
            with self._lock:
                self._bytes_sent += len(chunk)
        h.wfile.write(end)
        h.wfile.flush()

    def _send_embeddings(self, h: _Handler, body: dict[str, Any], *, empty: bool) -> None:
        raw = body.get("input")
        if isinstance(raw, str):
            texts = [raw]
        elif isinstance(raw, list) and all(isinstance(t, str) for t in raw):
            texts = list(raw)
        else:
            # Token-id inputs are valid OpenAI requests, but nothing here needs them.
            self._send_error(h, 400, "input must be a string or a list of strings")
            return
        dim = body.get("dimensions")
        dim = dim if isinstance(dim, int) and dim > 0 else self.embedding_dim
        data = (
            []
            if empty
            else [{"object": "embedding", "index": i, "embedding": embed_text(t, dim)} for i, t in enumerate(texts)]
        )
        if self.latency_per_input > 0:
            self._sleep(self.latency_per_input * len(texts))
        tokens = sum(_word_count(t) for t in texts)
        self._send_json(
            h,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or "test-model",
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _send_rerank(self, h: _Handler, body: dict[str, Any], *, empty: bool) -> None:
        """Cohere's rerank answer: the best `top_n` documents (all by default), best first."""
        query, raw = body.get("query"), body.get("documents")
        documents = [d.get("text") if isinstance(d, dict) else d for d in raw] if isinstance(raw, list) else None
        if not isinstance(query, str) or documents is None or not all(isinstance(d, str) for d in documents):
            self._send_error(h, 400, "query must be a string and documents a list of strings")
            return
        texts = cast(list[str], documents)
        scores = [float(x) for x in self.rerank_scores(query, texts)]
        top_n = body.get("top_n")
        count = top_n if isinstance(top_n, int) and top_n > 0 else len(texts)
        order = sorted(range(len(texts)), key=lambda i: -scores[i])[:count]
        results = [] if empty else [{"index": i, "relevance_score": scores[i]} for i in order]
        meta = {"api_version": {"version": "1"}, "billed_units": {"search_units": 1}}
        self._send_json(h, {"id": uuid.uuid4().hex, "results": results, "meta": meta})

    def _match_rule(self, messages: list[dict[str, Any]]) -> Reply | None:
        if not messages:
            return None
        texts = [_message_text(m) for m in messages]
        with self._lock:
            for rule in self._rules:
                if any(rule.needle in t for t in texts):
                    return rule.next_reply()
        return None

    @staticmethod
    def _send_json(h: _Handler, payload: dict[str, Any]) -> None:
        h.send_payload(200, json.dumps(payload).encode("utf-8"))

    @staticmethod
    def _send_error(h: _Handler, status: int, message: str, retry_after: float | None = None) -> None:
        kind, code = _ERROR_KINDS.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", str(status))
        )
        payload = {"error": {"message": message, "type": kind, "code": code, "param": None}}
        headers = {} if retry_after is None else {"Retry-After": _format_seconds(retry_after)}
        h.send_payload(status, json.dumps(payload).encode("utf-8"), headers=headers)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ragmatrix.testing.openai_server",
        description="Serve a scripted OpenAI-compatible API until killed.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--answer", default="yes", help="constant chat answer")
    parser.add_argument("--embedding-dim", type=int, default=16)
    parser.add_argument("--model", action="append", dest="models", help="served model name (repeatable)")
    parser.add_argument("--outage", type=float, default=0.0, help="answer 500 for this many seconds after start")
    parser.add_argument("--rate-limit", type=int, default=None, help="requests accepted per second (429 beyond)")
    parser.add_argument("--no-retry-after", action="store_true", help="the rate limit's 429s say not when to retry")
    parser.add_argument("--one-at-a-time", action="store_true", help="answer one request at a time, the others queue")
    args = parser.parse_args(argv)

    server = OpenAIServer(
        args.answer,
        latency=args.latency,
        embedding_dim=args.embedding_dim,
        models=args.models or ("test-model", "test-embed"),
        host=args.host,
        port=args.port,
    )

    def _terminate(signum: int, frame: FrameType | None) -> None:
        # Turn SIGTERM into a normal exit so the finally block below closes the socket.
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _terminate)
    server.one_at_a_time = args.one_at_a_time
    server.start()
    if args.outage > 0:
        server.outage(args.outage)
    if args.rate_limit is not None:
        server.rate_limit(args.rate_limit, retry_after=not args.no_retry_after)
    try:
        # The parent process reads this one line to learn the (ephemeral) port.
        print(server.base_url, flush=True)
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

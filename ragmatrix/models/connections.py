"""HTTP/1.1 connections to one server on the run's loop: asyncio carries the bytes, httptools
(llhttp, the parser of Node.js and aiohttp) reads the answers, and a request is written here.

This is the direct route of `ragmatrix.models.http` (no proxy in the environment). Against an
aiohttp session it costs nothing at start-up, where importing aiohttp (with the TLS contexts it
builds as it is imported) cost 0.13 s of CPU, and less per request (`docs/scale.md`). A
connection is kept open for the next request when the server keeps it alive and the answer was
read to its end; any other connection is closed: a cancelled request (a timeout), an answer cut
short or cut at its limit, a server that closes after each answer, bytes that are not HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import zlib
from typing import Any
from urllib.parse import unquote, urlsplit

import httptools

# How a body is decoded when a server compresses it unasked (the requests ask for none).
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
# What no header may hold: a line break would let a value (a key from the environment) add
# headers or a request of its own.
_FORBIDDEN_IN_HEADERS = str.maketrans("", "", "\r\n\0")


class ConnectionLost(ConnectionError):
    """The server closed the connection, or sent what is not HTTP, before its answer ended."""


class Answer:
    """A response as it was read: status, headers (names in lower case) and body."""

    __slots__ = ("status", "headers", "body", "complete")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, complete: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.complete = complete  # False: cut at the limit, the rest never read


class _Connection(asyncio.Protocol):
    """One connection: one request at a time, its answer parsed as the bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = False  # what the last answer's head said
        self._answer: asyncio.Future[Answer] | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._status = 0
        self._headers: dict[str, str] = {}
        self._framed = False  # the body's end is marked (a length, chunks): not at the close
        self._body: list[bytes] = []
        self._size = 0
        self._limit: int | None = None

    # -- asyncio's side ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._answer is None or self._answer.done() or self._parser is None:
            self.close()  # bytes nobody asked for: this connection cannot be trusted again
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            if not self._answer.done():
                self._answer.set_exception(ConnectionLost(f"not an HTTP answer: {error}"))
            self.close()

    def eof_received(self) -> bool:
        # A body that runs until the server closes (no length, no chunks) ends here.
        answer = self._answer
        if answer is not None and not answer.done() and self._status and not self._framed:
            self._finish(complete=True)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is not None and not self._answer.done():
            said = f": {exc}" if exc else ""
            self._answer.set_exception(ConnectionLost(f"server disconnected before its answer ended{said}"))

    # -- the parser's callbacks ------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        self._status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()
        self._framed = "content-length" in self._headers or "transfer-encoding" in self._headers

    def on_body(self, chunk: bytes) -> None:
        if self._answer is None or self._answer.done():
            return  # past the limit: the rest is never kept
        self._body.append(chunk)
        self._size += len(chunk)
        if self._limit is not None and self._size > self._limit:
            self._finish(complete=False)

    def on_message_complete(self) -> None:
        if self._status < 200:  # an informational answer precedes the real one: read on
            self._status, self._headers = 0, {}
            return
        if self._answer is not None and not self._answer.done():
            self._finish(complete=True)

    def _finish(self, complete: bool) -> None:
        assert self._answer is not None
        body = b"".join(self._body)
        if not complete and self._limit is not None:
            body = body[: self._limit + 1]  # one byte past the limit says the body was longer
        self._answer.set_result(Answer(self._status, self._headers, body, complete))
        self._body, self._size = [], 0

    # -- the pool's side -----------------------------------------------------------------------

    def send(self, request: bytes, limit: int | None) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._answer = asyncio.get_running_loop().create_future()
        self._parser = httptools.HttpResponseParser(self)
        self._status, self._headers, self._framed, self._limit = 0, {}, False, limit
        self.keep_alive = False
        self.transport.write(request)
        return self._answer

    def reusable(self, answer: Answer) -> bool:
        """The answer was read to its end and the server keeps the connection: ready for the
        next request."""
        return answer.complete and self.keep_alive and self._framed and not self.closed

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class ConnectionPool:
    """At most `limit` connections to the server of `base_url`, kept open between requests; made
    on the loop of its first request (the caller makes a new pool for a new loop)."""

    def __init__(self, base_url: str, limit: int, ssl: Any = None) -> None:
        parts = urlsplit(base_url)
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        default_port = (parts.scheme == "https" and self.port == 443) or (parts.scheme == "http" and self.port == 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default_port else f"{host}:{self.port}"
        self.basic_auth = _basic_auth(parts.username, parts.password)
        self._ssl = ssl
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._slots = asyncio.Semaphore(limit)
        # Each request's line and headers but its length, by address and headers: made once.
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}

    async def post(self, url: str, body: bytes, headers: dict[str, str], limit: int | None = None) -> Answer:
        """The answer to a POST of `body` to `url` (on this pool's server); its body cut after
        `limit + 1` bytes where `limit` is given (the connection then closes)."""
        request = self._head(url, headers) + b"Content-Length: %d\r\n\r\n" % len(body) + body
        async with self._slots:
            connection = await self._connection()
            try:
                answer = await connection.send(request, limit)
            except BaseException:  # cancelled (a timeout) or lost: the exchange cannot go on
                connection.close()
                self._open.discard(connection)
                raise
            if connection.reusable(answer):
                self._idle.append(connection)
            else:
                connection.close()
                self._open.discard(connection)
        return _decoded(answer)

    def _head(self, url: str, headers: dict[str, str]) -> bytes:
        """The request line and headers, but the length: made once per target and headers."""
        key = (url, tuple(headers.items()))
        head = self._heads.get(key)
        if head is None:
            parts = urlsplit(url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            fields = {"Host": self.host_header, "User-Agent": "ragmatrix", "Accept": "*/*", **headers}
            if self.basic_auth and not any(name.lower() == "authorization" for name in headers):
                fields["Authorization"] = self.basic_auth
            lines = [f"POST {_clean(target)} HTTP/1.1"]
            lines += [f"{_clean(name)}: {_clean(value)}" for name, value in fields.items()]
            head = ("\r\n".join(lines) + "\r\n").encode("latin-1", "replace")
            if len(self._heads) < 64:  # a key changed while the run goes on makes another
                self._heads[key] = head
        return head

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
            self._open.discard(connection)  # the server closed it while it was idle
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            _Connection, self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None
        )
        self._open.add(connection)
        return connection

    async def close(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()


def _clean(text: str) -> str:
    return str(text).translate(_FORBIDDEN_IN_HEADERS)


def _decoded(answer: Answer) -> Answer:
    encoding = answer.headers.get("content-encoding", "").strip().lower()
    if answer.complete and encoding in _DECODERS:
        try:
            answer.body = zlib.decompress(answer.body, _DECODERS[encoding])
        except zlib.error as error:
            raise ConnectionLost(f"an answer that does not decompress: {error}") from None
    return answer


def _basic_auth(user: str | None, password: str | None) -> str | None:
    if user is None:
        return None
    pair = f"{unquote(user)}:{unquote(password or '')}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")

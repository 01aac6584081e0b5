"""HTTP/1.1 connections to one server on the run's loop: h11 reads and writes the protocol,
asyncio carries the bytes.

This is the direct route of `ragmatrix.models.http` (no proxy in the environment): per request
it costs about half the CPU of an aiohttp session, and nothing at start-up, where importing
aiohttp (with the TLS contexts it builds as it is imported) cost 0.13 s (`docs/scale.md`). A
connection is kept open for the next request when both sides end the exchange cleanly; any
other connection is closed: a cancelled request (a timeout), an answer cut short, a server that
closes after each answer, a body read only up to its limit.
"""

from __future__ import annotations

import asyncio
import base64
import zlib
from typing import Any
from urllib.parse import unquote, urlsplit

import h11

# How a body is decoded when a server compresses it unasked (the requests ask for none).
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


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
    """One connection: one request at a time, its answer read as the bytes arrive."""

    def __init__(self) -> None:
        self.protocol = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._answer: asyncio.Future[Answer] | None = None
        self._status = 0
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._limit: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def eof_received(self) -> bool:
        # A body that runs until the server closes (no length given) ends here.
        self.data_received(b"")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(ConnectionLost(f"server disconnected{f': {exc}' if exc else ''}"))

    def data_received(self, data: bytes) -> None:
        if self._answer is None or self._answer.done():
            self.close()  # bytes nobody asked for: this connection cannot be trusted again
            return
        try:
            self.protocol.receive_data(data)
            self._read_events()
        except h11.RemoteProtocolError as error:
            said = "server disconnected before its answer ended" if not data else f"not an HTTP answer: {error}"
            self._answer.set_exception(ConnectionLost(said))
            self.close()

    def _read_events(self) -> None:
        assert self._answer is not None
        while True:
            event = self.protocol.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            kind = type(event)
            if kind is h11.Data:
                self._body.append(event.data)  # type: ignore[union-attr]
                self._size += len(event.data)  # type: ignore[union-attr]
                if self._limit is not None and self._size > self._limit:
                    self._finish(complete=False)
                    return
            elif kind is h11.Response:
                self._status = event.status_code  # type: ignore[union-attr]
                self._headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}  # type: ignore[union-attr]
            elif kind is h11.EndOfMessage:
                self._finish(complete=True)
                return
            elif kind is h11.ConnectionClosed:
                raise h11.RemoteProtocolError("the server closed the connection mid-answer")
            # an informational (1xx) answer precedes the real one: read on

    def _finish(self, complete: bool) -> None:
        assert self._answer is not None
        body = b"".join(self._body)
        if not complete and self._limit is not None:
            body = body[: self._limit + 1]  # one byte past the limit says the body was longer
        self._answer.set_result(Answer(self._status, self._headers, body, complete))
        self._body, self._size = [], 0

    def send(self, request: h11.Request, body: bytes, limit: int | None) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._answer = asyncio.get_running_loop().create_future()
        self._status, self._headers, self._limit = 0, {}, limit
        wire = self.protocol.send(request) or b""
        wire += self.protocol.send(h11.Data(data=body)) or b""
        wire += self.protocol.send(h11.EndOfMessage()) or b""
        self.transport.write(wire)
        return self._answer

    def reusable(self) -> bool:
        """Both sides ended the exchange and may go on: ready for the next request."""
        protocol = self.protocol
        if self.closed or protocol.our_state is not h11.DONE or protocol.their_state is not h11.DONE:
            return False
        protocol.start_next_cycle()
        return True

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

    def serves(self, url: str) -> bool:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.scheme == self.scheme and parts.hostname == self.host and port == self.port

    async def post(self, url: str, body: bytes, headers: dict[str, str], limit: int | None = None) -> Answer:
        """The answer to a POST of `body` to `url` (on this pool's server); its body cut after
        `limit + 1` bytes where `limit` is given (the connection then closes)."""
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        fields = [("Host", self.host_header), ("Content-Length", str(len(body))), ("Accept", "*/*")]
        fields += [("User-Agent", "ragmatrix"), *headers.items()]
        if self.basic_auth and not any(name.lower() == "authorization" for name in headers):
            fields.append(("Authorization", self.basic_auth))
        request = h11.Request(method="POST", target=target, headers=fields)
        async with self._slots:
            connection = await self._connection()
            try:
                answer = await connection.send(request, body, limit)
            except BaseException:  # cancelled (a timeout) or lost: the exchange cannot go on
                connection.close()
                self._open.discard(connection)
                raise
            if answer.complete and connection.reusable():
                self._idle.append(connection)
            else:
                connection.close()
                self._open.discard(connection)
        return _decoded(answer)

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

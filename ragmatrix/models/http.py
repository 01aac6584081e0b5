"""Asking an HTTP server directly: one model's connections on the run's loop, closed at the
run's end, and failures classified the way the client layer retries them.

The direct chat client (`ragmatrix.models.openai_chat`) and any provider that speaks its own
JSON over HTTP (`docs/examples/http_embedder.py`) share it: a status of 400 or more is a
`StatusError` with the server's message and its `Retry-After`; a body that is not JSON is a
`BadResponse` (a proxy's error page: retried like a 5xx); a refused or dropped connection is
retried; `classify` turns each into the `Failure` that `ragmatrix.models.client.call` acts on.
A body can be read only up to a limit: a server that answers 200 MB is cut off there, never
read whole.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ragmatrix.foundations.secrets import redact
from ragmatrix.models import aio
from ragmatrix.models.client import Failure, is_retryable_status, parse_retry_after

if TYPE_CHECKING:
    import aiohttp

    from ragmatrix.models.connections import ConnectionPool

# Status names as the OpenAI SDK (and so litellm) calls them, for messages people recognise.
STATUS_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    503: "ServiceUnavailableError",
}


class BadResponse(Exception):
    """An answer that is not what the endpoint speaks (a proxy's HTML page, say): a server fault
    that may pass, retried like a 5xx."""


class StatusError(Exception):
    """An HTTP error status, with what the server said and when it asks to be tried again."""

    def __init__(self, status: int, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.status_code = status
        self.retry_after = retry_after


def import_meanwhile() -> None:
    """Import the HTTP client on the run's loop thread while the caller goes on (reading the
    data files, collecting the items): off the path to the first request. The session made
    later waits for it, if need be, on Python's import lock."""
    aio.loop().call_soon_threadsafe(_import_client)


def _import_client() -> None:
    try:
        if proxy_named():
            import aiohttp  # noqa: F401
        else:
            import ragmatrix.models.connections  # noqa: F401
    except ImportError:  # the session reports it where it is needed
        pass


# The variables a proxy is named by, as httpx and aiohttp read them.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "ws_proxy", "wss_proxy")


def proxy_named() -> bool:
    """Does the environment name a proxy at all? Then requests go through aiohttp, which finds
    the proxy for each address (NO_PROXY included); else through this package's own
    connections (`ragmatrix.models.connections`)."""
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in PROXY_VARIABLES)


class HttpSession:
    """One model's connections to its server: at most `connections` at once, made on the run's
    loop and closed with it. Directly (`ragmatrix.models.connections`), or with aiohttp where
    the environment names a proxy; either is imported on the loop, not in the thread that
    builds the model."""

    def __init__(self, url: str, connections: int) -> None:
        self._url = url
        self._proxy: tuple[Any, Any] | None = None  # looked up with the first session
        self._connections = connections
        self._direct = not proxy_named()
        self._pools: dict[str, ConnectionPool] = {}  # by scheme and address
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.received = 0  # bytes of answer bodies read, over the session's life

    async def session(self) -> aiohttp.ClientSession:
        # A session belongs to the loop it was made on; the run's loop is replaced only when it
        # is closed (`ragmatrix.models.aio`), and the session is closed with it. Each attempt's
        # time is bounded by the client layer (`ragmatrix.models.client.bounded`), not here.
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            import aiohttp

            self._proxy = env_proxy(self._url)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections, ssl=ssl_context(self._url)),
                # Proxies from the environment, as httpx (and so litellm) honours them: looked up
                # once (`env_proxy`), not on a worker thread for every request as trust_env does.
                trust_env=self._proxy is None,
                timeout=aiohttp.ClientTimeout(total=None),  # aiohttp's default (5 min) would cut a queued request
            )
            self._loop = loop
            aio.at_close(self._session.close)
        return self._session

    def _pool(self, url: str) -> ConnectionPool:
        """The connections to `url`'s server on the running loop (pools are closed with it)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._pools, self._loop = {}, loop
        parts = urlsplit(url)
        address = f"{parts.scheme}://{parts.netloc}"
        pool = self._pools.get(address)
        if pool is None:
            from ragmatrix.models.connections import ConnectionPool

            secure = ssl_context(url) if parts.scheme == "https" else None
            pool = self._pools[address] = ConnectionPool(url, self._connections, ssl=secure)
            aio.at_close(pool.close)
        return pool

    async def post(
        self, url: str, payload: bytes, headers: dict[str, str] | None = None, limit: int | None = None
    ) -> bytes:
        """The body of the answer to a POST; a status of 400 or more raises `StatusError`.
        `limit`: read at most `limit + 1` bytes and drop the connection there, so that a body
        longer than `limit` (it comes back longer) is never read whole."""
        if not self._direct:
            return await self._post_with_aiohttp(url, payload, headers, limit)
        answer = await self._pool(url).post(url, payload, headers or {}, limit)
        self.received += len(answer.body)
        if answer.status >= 400:
            retry_after = parse_retry_after(answer.headers.get("retry-after"))
            raise StatusError(answer.status, error_text(answer.body), retry_after)
        return answer.body

    async def _post_with_aiohttp(
        self, url: str, payload: bytes, headers: dict[str, str] | None, limit: int | None
    ) -> bytes:
        session = await self.session()
        proxy, proxy_auth = self._proxy or (None, None)
        async with session.post(url, data=payload, headers=headers, proxy=proxy, proxy_auth=proxy_auth) as response:
            raw = await self._read(response, limit)
            if response.status >= 400:
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                raise StatusError(response.status, error_text(raw), retry_after)
        return raw

    async def _read(self, response: aiohttp.ClientResponse, limit: int | None) -> bytes:
        if limit is None:
            raw = await response.read()
            self.received += len(raw)
            return raw
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = await response.content.read(min(limit + 1 - size, 64 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        self.received += size
        if size > limit:
            response.close()  # the rest is never read: the connection goes, not back to the pool
        return b"".join(chunks)

    async def post_json(self, url: str, payload: Any, headers: dict[str, str] | None = None) -> Any:
        """`payload` posted as JSON, the answer read as JSON (`BadResponse` when it is not)."""
        sent = {"Content-Type": "application/json", **(headers or {})}
        raw = await self.post(url, json.dumps(payload).encode(), sent)
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise BadResponse(f"not JSON: {raw[:200]!r}") from None


def classify(error: BaseException, secret_names: tuple[str, ...] = ()) -> Failure:
    """429, 408 and 5xx are retried, other statuses are not; connection failures and bodies that
    are no answer are retried; a rate limit says the server is there, so it never counts towards
    the breaker. The message names the status as the OpenAI SDK would, so the direct client and
    litellm read alike."""
    status = getattr(error, "status_code", None)
    if isinstance(error, StatusError):
        fallback = "InternalServerError" if error.status_code >= 500 else "APIStatusError"
        name = STATUS_NAMES.get(error.status_code, fallback)
    elif isinstance(error, BadResponse):
        name, status = "InternalServerError", 500
    else:
        name = "APIConnectionError" if is_transport(error) else type(error).__name__
    detail = first_line(str(error)) or type(error).__name__
    message = redact(f"{name}: {detail}", secret_names)
    if status is not None:
        message = f"HTTP {status} {message}"
    retryable = is_retryable_status(status) or (status is None and name == "APIConnectionError")
    outage = retryable and status != 429
    return Failure(message, retryable=retryable, retry_after=getattr(error, "retry_after", None), outage=outage)


def error_text(raw: bytes) -> str:
    """What an error body says: OpenAI's `{"error": {"message": ...}}`, or its first line."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return first_line(raw.decode("utf-8", "replace"))
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return first_line(str(error["message"]))
    if isinstance(error, str):
        return first_line(error)
    return first_line(raw.decode("utf-8", "replace"))


def is_transport(error: BaseException) -> bool:
    """A connection refused, reset or dropped mid-answer, an address that does not resolve, a
    TLS failure: the server may be back soon."""
    if isinstance(error, OSError):  # ConnectionError, socket.gaierror, ssl.SSLError among them
        return True
    aiohttp = sys.modules.get("aiohttp")  # not imported: the error cannot be one of its
    return aiohttp is not None and isinstance(error, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError)


def env_proxy(url: str) -> tuple[Any, Any] | None:
    """The proxy the environment names for `url` (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, ...)
    and its credentials, as aiohttp's `trust_env` would find them: (None, None) for none; None
    where aiohttp cannot say (the session then looks for itself)."""
    try:
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL
    except ImportError:
        return None
    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:  # no proxy for this address
        return None, None
    except Exception:  # a malformed variable: let aiohttp say so on the request
        return None


def ssl_context(url: str) -> Any:
    """The CA bundle litellm's client would trust (certifi's, or SSL_CERT_FILE), for https only:
    loading it costs about 16 ms of CPU, which a local server need not pay. One context per
    bundle serves the process: the availability probe and each model's connections share it."""
    if not url.startswith("https:"):
        return True  # aiohttp's default, unused over plain http
    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:  # the system's store is still a sound default
            cafile = None
    return _verifying_context(cafile)


@functools.cache
def _verifying_context(cafile: str | None) -> Any:
    import ssl

    return ssl.create_default_context(cafile=cafile)


def first_line(text: str, limit: int = 300) -> str:
    """The first line of an error message, cut to `limit` characters: one line per error row."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]

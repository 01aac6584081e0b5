"""The chat completions endpoint of OpenAI, or of any OpenAI-compatible server, asked directly.

A `litellm: openai/<name>` entry is answered by one HTTP endpoint whose wire format ragmatrix
knows. Going through litellm there costs a multi-second import and several milliseconds of
client CPU per request; the model's own HTTP session (`ragmatrix.models.http`) asks the same
request for a fraction of both. The request is the one litellm would send (model name without `openai/`, the messages,
`params`), the answer is read the same way (the first choice's text, the token counts the
server reports), and failures are classified the same way, so the retries, timeouts, breaker,
response cache and redaction of `ragmatrix.models.chat` and `ragmatrix.models.client` behave
alike on both paths. `ragmatrix.models.providers.litellm_chat.chat_client` decides which path a
model takes.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from typing import Any, Protocol

from ragmatrix.cost.device import Device, remote
from ragmatrix.models import http
from ragmatrix.models.chat import MAX_ANSWER_CHARS, ChatProvider, CutAnswer
from ragmatrix.models.client import EmptyAnswer, Failure
from ragmatrix.models.http import BadResponse
from ragmatrix.models.spec import expand_env

PREFIX = "openai/"
OPENAI_API_BASE = "https://api.openai.com/v1"
NO_KEY = "no-key"  # OpenAI-compatible servers often need none; litellm sends this one

# The request fields of OpenAI's chat completions API. A model whose `params` hold anything
# else (a litellm setting such as `drop_params`, a provider's own extension) stays on litellm,
# which knows what to do with it.
CHAT_FIELDS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning_effort",
        "response_format",
        "seed",
        "service_tier",
        "stop",
        "store",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
    }
)

# OpenAI's reasoning models refuse `max_tokens` and take `max_completion_tokens`; litellm renames
# it for them, and so does this client.
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")

# The most bytes of an answer's body that are read: room for MAX_ANSWER_CHARS characters of the
# answer even written as JSON escapes (12 bytes for a character outside the BMP), and for the
# rest of the reply. A longer body is cut off there, and its answer read from what came.
MAX_BODY_BYTES = 12 * MAX_ANSWER_CHARS + 64 * 1024
CONTENT = re.compile(rb'"content"\s*:\s*"')


class Route(Protocol):
    """What the client reads of a model's spec (a litellm entry's, `LitellmSpec`, has it)."""

    id: str
    litellm: str  # "openai/<name>"
    params: dict[str, Any]
    api_key_env: str | None
    requires_env: list[str]
    concurrency: int

    def resolved_api_base(self) -> str | None: ...


def direct_route(spec: Route) -> bool:
    """Can this model be asked directly, with exactly the request litellm would send?"""
    return expand_env(spec.litellm).startswith(PREFIX) and set(spec.params) <= CHAT_FIELDS


class OpenAIChat(ChatProvider):
    """A chat provider for one model on one endpoint."""

    # What a first call could find slow (importing the HTTP client) is queued on the loop's thread when
    # the model is built, ahead of its requests: its first request need not go alone (see `LLM._ask`).
    starts_warm = True

    def __init__(self, spec: Route) -> None:
        self.spec = spec
        # Where the requests go, worked out once: the session below is bound to it.
        self._endpoint = self._resolved_endpoint()
        self._through_base = bool(spec.resolved_api_base())
        self._basic_auth = urllib.parse.urlsplit(self._endpoint).username is not None
        self._headers: tuple[tuple[str, str | None], dict[str, str]] | None = None
        self.http = http.HttpSession(self._endpoint, connections=spec.concurrency)
        self.served: str | None = None  # the model id the server says answered
        self._device: tuple[str | None, Device] | None = None  # for `served`, as `device` made it
        http.import_meanwhile()  # on the loop's thread, queued before any request of this model

    # -- what is sent --------------------------------------------------------------------------

    def endpoint(self) -> str:
        return self._endpoint

    def _resolved_endpoint(self) -> str:
        base = self.spec.resolved_api_base() or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
        return (base or OPENAI_API_BASE).rstrip("/") + "/chat/completions"

    def headers(self) -> dict[str, str]:
        """The request's headers. The key and organization are read from the environment for
        every request (a key may be changed while a run goes on); the headers are made again
        only when what was read changes."""
        if self.spec.api_key_env:
            key = os.environ.get(self.spec.api_key_env, "")
        elif self._through_base:
            key = NO_KEY
        else:
            key = os.environ.get("OPENAI_API_KEY", "")
        organization = os.environ.get("OPENAI_ORGANIZATION")
        if self._headers is None or self._headers[0] != (key, organization):
            headers = {"Content-Type": "application/json"}
            if not self._basic_auth:
                # credentials in the address (`user:password@`) go as basic authentication, as litellm sends them
                headers["Authorization"] = f"Bearer {key}"
            if organization:  # as litellm sends it
                headers["OpenAI-Organization"] = organization
            self._headers = ((key, organization), headers)
        return dict(self._headers[1])  # a copy: what a caller adds stays its own

    def body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        model = expand_env(self.spec.litellm).removeprefix(PREFIX)
        params = dict(self.spec.params)
        if "max_tokens" in params and REASONING_MODEL.match(model):
            params.setdefault("max_completion_tokens", params.pop("max_tokens"))
        return {"model": model, "messages": messages, **params}

    # -- the call ------------------------------------------------------------------------------

    async def complete(
        self, messages: list[dict[str, str]], timeout: float
    ) -> tuple[str, dict[str, Any], float | None]:
        """The answer text, token usage as the server reports it, and cost (see `cost`)."""
        raw = await self.http.post(
            self.endpoint(), json.dumps(self.body(messages)).encode(), self.headers(), limit=MAX_BODY_BYTES
        )
        if len(raw) > MAX_BODY_BYTES:
            return self._cut_answer(messages, raw)
        try:
            reply = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise BadResponse(f"not JSON: {raw[:200]!r}") from None
        if not isinstance(reply, dict):
            raise BadResponse(f"not a chat completion: {raw[:200]!r}")
        text = _answer_text(reply)
        if isinstance(reply.get("model"), str):
            self.served = reply["model"]
        usage = reply.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        tokens = {
            "prompt_tokens": _count(usage.get("prompt_tokens")),
            "completion_tokens": _count(usage.get("completion_tokens")),
        }
        if not tokens["prompt_tokens"] and not tokens["completion_tokens"]:
            from ragmatrix.models.token_count import counted_tokens

            tokens = counted_tokens(messages, text) or tokens  # the server reported none
        return text, tokens, self.cost(tokens)

    def _cut_answer(self, messages: list[dict[str, str]], raw: bytes) -> tuple[str, dict[str, Any], float | None]:
        """The answer of a body cut off at `MAX_BODY_BYTES`: the first choice's text as far as it
        came. Its token counts (sent after the text, if at all) are counted here on what was
        read; its cost is unknown."""
        text = _partial_content(raw)
        if text is None or not text.strip():
            raise BadResponse(f"an answer of more than {MAX_BODY_BYTES} bytes with no text in them: {raw[:200]!r}")
        from ragmatrix.models.token_count import counted_tokens

        tokens = counted_tokens(messages, text) or {"prompt_tokens": 0, "completion_tokens": 0}
        return CutAnswer(text), tokens, None

    def cost(self, tokens: dict[str, int]) -> float | None:
        """The price of one answer in USD: the entry's `price:`, else litellm's local cost map
        (read as a file, as litellm would price it); None when neither knows the model, an
        unknown cost never counting as free."""
        from ragmatrix.cost.price import Price, price_of

        price, _ = price_of(self.spec)
        if not isinstance(price, Price):
            return None
        return price.usd(int(tokens.get("prompt_tokens") or 0), int(tokens.get("completion_tokens") or 0))

    def device(self) -> Device:
        """The server, and the model it says answered; worked out again only when that changes
        (every answer's cost figures ask for it)."""
        if self._device is None or self._device[0] != self.served:
            self._device = (self.served, remote(self.endpoint(), {"model": self.served or self.body([])["model"]}))
        return self._device[1]

    # -- failures ------------------------------------------------------------------------------

    def classify(self, error: BaseException) -> Failure:
        """As `LitellmChat.classify` does (see `ragmatrix.models.http.classify`)."""
        return http.classify(error, tuple(self.spec.requires_env))


def _answer_text(reply: dict[str, Any]) -> str:
    # An empty choice list, a null message or an empty text is a server fault that may pass:
    # retried, never cached, never scored (as on the litellm path).
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        raise EmptyAnswer("no choices")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if content is None:
        raise EmptyAnswer("content null")
    text = str(content)
    if not text.strip():
        raise EmptyAnswer("empty text")
    return text


def _partial_content(raw: bytes) -> str | None:
    """The text of the first `"content": "..."` string in a chat completion cut short, decoded
    as far as it goes; None when none begins."""
    found = CONTENT.search(raw)
    if found is None:
        return None
    body = raw[found.end() :].decode("utf-8", "ignore")
    end = re.search(r'(?<!\\)(?:\\\\)*"', body)  # the closing quote: one not escaped
    if end is not None:
        body = body[: end.end() - 1]
    body = re.sub(r"(?<!\\)((?:\\\\)*)\\(?:u[0-9a-fA-F]{0,3})?$", r"\1", body)  # an escape the cut split
    try:
        text = str(json.loads(f'"{body}"'))
    except json.JSONDecodeError:
        return None
    if text and "\ud800" <= text[-1] <= "\udbff":  # half a surrogate pair
        text = text[:-1]
    return text


def _count(value: Any) -> int:
    """A token count as the server reports it; anything but a whole number counts as none."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

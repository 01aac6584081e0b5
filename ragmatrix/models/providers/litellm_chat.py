"""`litellm: <provider>/<model>` with `kind: llm`: chat with any API litellm supports, or with
any OpenAI-compatible server named by `api_base`.

`openai/<name>` models (OpenAI itself, or a server named by `api_base`) are asked directly over
HTTP (`ragmatrix.models.openai_chat`), with the request litellm would send; every other model
goes through litellm, unless the entry says `client: litellm`. Either way the model's key, its
cached responses and its rows are the same.

litellm is imported lazily, with its local cost map, so that collection, cached runs and
direct models never pay for it. Its own retries and the OpenAI SDK's are turned off: retrying
happens in one place (`ragmatrix.models.client`), where 429s stay visible to the limiter.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from ragmatrix.cost.device import Device, remote
from ragmatrix.foundations import collector
from ragmatrix.foundations.secrets import redact
from ragmatrix.models import aio
from ragmatrix.models.chat import ChatProvider
from ragmatrix.models.client import EmptyAnswer, Failure, is_retryable_status, parse_retry_after
from ragmatrix.models.http import first_line
from ragmatrix.models.openai_chat import NO_KEY, OpenAIChat, direct_route
from ragmatrix.models.providers import provider
from ragmatrix.models.spec import ModelSpec, expand_env, probe_server

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder


class LitellmSpec(ModelSpec):
    """The fields of a model reached through litellm, chat or embeddings."""

    key: ClassVar[str | None] = "litellm"
    litellm: str  # "openai/gpt-4o-mini", "anthropic/...", "openai/<name>" + api_base
    api_base: str | None = None  # an OpenAI-compatible server; "${VAR}" reads the environment
    api_key_env: str | None = None  # the variable holding the key, when not the provider's usual one
    params: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, ... (part of the key)

    def resolved_api_base(self) -> str | None:
        return expand_env(self.api_base) if self.api_base else None

    def unavailable(self, probe: bool = True) -> str | None:
        reason = super().unavailable(probe)
        base = self.resolved_api_base()
        if reason is None and base and probe:
            return probe_server(base)
        return reason

    def fingerprint(self) -> dict[str, Any]:
        return {"provider": "litellm", "model": expand_env(self.litellm), "params": self.params}


@provider("litellm", needs={"litellm": "litellm"})
class LitellmChatSpec(LitellmSpec):
    provider: Literal["litellm"] = "litellm"
    kinds: ClassVar[tuple[str, ...]] = ("llm",)
    rank: ClassVar[int] = 10
    describe: ClassVar[str] = "a litellm model string"
    # auto: `openai/...` models are asked directly, the rest through litellm; litellm: always
    # through litellm. Not part of the key: both ask the same request.
    client: Literal["auto", "litellm"] = "auto"

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        return super().claims(entry) and entry.get("kind") != "embedder"

    def build(self, models: ModelBuilder) -> Model:
        from ragmatrix.models.chat import LLM

        return LLM(self, chat_client(self), models.response_cache())

    def prepare_meanwhile(self) -> None:
        if self.client == "auto" and direct_route(self):  # asked directly over HTTP
            from ragmatrix.models import http

            http.import_meanwhile()


def chat_client(spec: LitellmChatSpec) -> ChatProvider:
    """The client that asks the model: direct HTTP where the endpoint speaks OpenAI's chat
    completions and litellm would send nothing else, litellm otherwise."""
    if spec.client == "auto" and direct_route(spec):
        return OpenAIChat(spec)
    return LitellmChat(spec)


# What litellm imports on its first request through its OpenAI route (OpenAI itself and every
# OpenAI-compatible server): about 470 modules. Imported with litellm instead, so that the first
# request's timeout measures the server, not the client's cold start. On a busy machine that
# import took 3-5 s: the first attempt timed out, sometimes after its request had been sent, and
# the retry asked the server a second time.
FIRST_REQUEST_MODULES = (
    "openai.resources",
    "litellm.llms.openai.openai",
    "litellm._service_logger",
    "litellm.integrations.prometheus_services",
    "litellm.proxy._types",
)


def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with collector.made_to_last():  # litellm's modules live to the run's end
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        # Embedding calls ignore max_retries=0 and fall back to this default; retries belong to
        # ragmatrix.models.client alone.
        litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[misc]
        for module in FIRST_REQUEST_MODULES:
            try:
                importlib.import_module(module)
            except ImportError:  # another litellm release: its first request imports what it needs
                pass
    from ragmatrix.foundations.secrets import guard_logging

    guard_logging()  # litellm adds log handlers of its own
    return litellm


class LitellmChat(ChatProvider):
    """One `litellm.acompletion` request per answer."""

    def __init__(self, spec: LitellmSpec) -> None:
        self.spec = spec
        self.litellm = import_litellm()
        self.served: str | None = None  # the model id the server says answered
        # litellm keeps async HTTP clients of its own: closed on the run's loop, where they live.
        close = getattr(self.litellm, "close_litellm_async_clients", None)
        if close is not None:
            aio.at_close(close)

    def connection(self) -> dict[str, Any]:
        connection: dict[str, Any] = {}
        base = self.spec.resolved_api_base()
        if base:
            connection["api_base"] = base
            connection["api_key"] = NO_KEY
        if self.spec.api_key_env:
            connection["api_key"] = os.environ.get(self.spec.api_key_env, "")
        return connection

    async def complete(
        self, messages: list[dict[str, str]], timeout: float
    ) -> tuple[str, dict[str, Any], float | None]:
        """The answer text, token usage and cost (None when litellm cannot price the model)."""
        response = await self.litellm.acompletion(
            model=expand_env(str(self.spec.litellm)),
            messages=messages,
            timeout=timeout,
            num_retries=0,
            max_retries=0,
            **self.connection(),
            **self.spec.params,
        )
        self.served = getattr(response, "model", None) or self.served
        choices = getattr(response, "choices", None) or []
        # An empty choice list, a null message or an empty text is a server fault that may
        # pass: retried, never cached, never scored.
        if not choices:
            raise EmptyAnswer("no choices")
        content = getattr(getattr(choices[0], "message", None), "content", None)
        if content is None:
            raise EmptyAnswer("content null")
        text = str(content)
        if not text.strip():
            raise EmptyAnswer("empty text")
        usage = getattr(response, "usage", None)
        usage_dict = {
            "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
            "completion_tokens": getattr(usage, "completion_tokens", 0) or 0,
        }
        if not usage_dict["prompt_tokens"] and not usage_dict["completion_tokens"]:
            usage_dict = self._counted(messages, text)  # the server reported none
        return text, usage_dict, self._cost(response)

    def _counted(self, messages: list[dict[str, str]], text: str) -> dict[str, Any]:
        """Tokens counted here, with litellm's tokenizer for the model, and marked as counted."""
        model = expand_env(str(self.spec.litellm))
        try:
            prompt = self.litellm.token_counter(model=model, messages=messages)
            completion = self.litellm.token_counter(model=model, text=text, count_response_tokens=True)
        except Exception:  # a tokenizer that cannot load: no counts rather than no answer
            return {"prompt_tokens": 0, "completion_tokens": 0}
        return {"prompt_tokens": int(prompt), "completion_tokens": int(completion), "counted": 1}

    def _cost(self, response: Any) -> float | None:
        hidden = getattr(response, "_hidden_params", None) or {}
        if "response_cost" in hidden:
            # litellm prices each response as it logs it (None when it cannot): pricing it
            # again costs as much client time as the rest of the call.
            cost = hidden["response_cost"]
        else:
            try:
                cost = self.litellm.completion_cost(completion_response=response)
            except Exception:  # litellm raises for any model it has no price for
                return None
        return float(cost) if cost else None

    def device(self) -> Device:
        """The server named by `api_base`, else the API litellm routes to (`remote: anthropic`)."""
        base = self.spec.resolved_api_base()
        model = self.served or expand_env(str(self.spec.litellm)).partition("/")[2]
        return remote(base or expand_env(str(self.spec.litellm)).partition("/")[0], {"model": model})

    def classify(self, error: BaseException) -> Failure:
        status = getattr(error, "status_code", None)
        name = type(error).__name__
        message = redact(f"{name}: {first_line(str(error))}", tuple(self.spec.requires_env))
        if status is not None:
            message = f"HTTP {status} {message}"
        transport = name in {"Timeout", "APIConnectionError", "ServiceUnavailableError", "InternalServerError"}
        retryable = is_retryable_status(status) or (status is None and transport)
        # A rate limit says the server is there: it must not trip the model's breaker.
        outage = retryable and status != 429
        return Failure(message, retryable=retryable, retry_after=_retry_after(error), outage=outage)


def _retry_after(error: BaseException) -> float | None:
    for headers in (
        getattr(getattr(error, "response", None), "headers", None),
        getattr(error, "litellm_response_headers", None),
        getattr(error, "headers", None),
    ):
        if headers is not None:
            try:
                value = headers.get("retry-after")
            except AttributeError:
                continue
            if value is not None:
                return parse_retry_after(value)
    return None

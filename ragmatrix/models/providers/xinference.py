"""`xinference: <model name>` with `endpoint:`: an LLM or an embedder on an Xinference server,
found running there or launched, and terminated at the end only when this process launched it.
Requests go to the server's OpenAI-compatible API through litellm.

`XinferenceServer` does the finding and launching through `xinference-client`, which is
synchronous: its calls run in a thread, once per model and process, never per request. Once the
model runs, requests go through the same client layer as every other model (concurrency limit,
timeouts, bounded retries).
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast

from pydantic import Field, model_validator

from ragmatrix.cost.device import Device, remote
from ragmatrix.foundations.secrets import redact
from ragmatrix.models.chat import LLM, ChatProvider, Messages
from ragmatrix.models.client import Failure, ModelError
from ragmatrix.models.embedder import EmbeddingModel, EmbeddingProvider
from ragmatrix.models.providers import provider
from ragmatrix.models.spec import EmbedderSpec, ModelSpec, expand_env, probe_server

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.providers.litellm_chat import LitellmChat, LitellmSpec
    from ragmatrix.models.providers.litellm_embedder import LitellmEmbedding
    from ragmatrix.models.spec import ModelBuilder

# The launch_model arguments an entry may name directly.
LAUNCH_FIELDS = ("model_engine", "model_size_in_billions", "model_format", "quantization")


@provider("xinference", needs={"xinference_client": "xinference-client", "litellm": "litellm"})
class XinferenceSpec(EmbedderSpec):
    provider: Literal["xinference"] = "xinference"
    key: ClassVar[str | None] = "xinference"
    kinds: ClassVar[tuple[str, ...]] = ("llm", "embedder")
    rank: ClassVar[int] = 40
    describe: ClassVar[str] = "an xinference model name"
    xinference: str  # a model name on the server, launched there if not running
    endpoint: str | None = None  # the server, "http://host:9997"; "${VAR}" reads the environment
    api_key_env: str | None = None  # the variable holding the server's key, if it wants one
    params: dict[str, Any] = Field(default_factory=dict)  # generation parameters (part of the key)
    # Launch settings (part of the key): what launch_model is asked for.
    model_engine: str | None = None
    model_size_in_billions: int | float | str | None = None
    model_format: str | None = None
    quantization: str | None = None
    launch: dict[str, Any] = Field(default_factory=dict)  # any other launch_model arguments
    launch_timeout: float = Field(default=1800.0, gt=0)  # seconds to find or launch the model

    @model_validator(mode="after")
    def check_endpoint(self) -> XinferenceSpec:
        if not self.endpoint:
            raise ValueError("an xinference model needs an endpoint (the server, e.g. ${XINFERENCE_ENDPOINT})")
        return self

    def resolved_endpoint(self) -> str | None:
        """The server's root URL ("http://host:port"); a trailing /v1 is dropped."""
        if not self.endpoint:
            return None
        endpoint = expand_env(self.endpoint).strip().rstrip("/")
        return endpoint.removesuffix("/v1") or None

    def launch_settings(self) -> dict[str, Any]:
        """The arguments, besides name and type, that launch_model is given."""
        named = {f: getattr(self, f) for f in LAUNCH_FIELDS if getattr(self, f) is not None}
        return {**self.launch, **named}

    def route(self, uid: str) -> ModelSpec:
        """The litellm spec that reaches the running model `uid` through the server's
        OpenAI-compatible API."""
        fields = {"id", "kind", "api_key_env", "requires_env", "concurrency", "timeout", "retries", "params"}
        fields |= {"breaker_after", "breaker_patience"}
        if self.kind == "embedder":
            fields.add("batch_size")
        route = {name: getattr(self, name) for name in fields}
        return ModelSpec(**{**route, "litellm": f"openai/{uid}", "api_base": f"{self.resolved_endpoint()}/v1"})

    def unavailable(self, probe: bool = True) -> str | None:
        reason = super().unavailable(probe)
        if reason is not None:
            return reason
        endpoint = self.resolved_endpoint()
        if not endpoint:
            return f"endpoint {self.endpoint} is empty"
        return probe_server(endpoint + "/v1", name=endpoint) if probe else None

    def fingerprint(self) -> dict[str, Any]:
        # named by what the server is asked to launch, never by its address
        return {
            "provider": "xinference",
            "model": expand_env(self.xinference),
            "launch": self.launch_settings(),
            "params": self.params,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }

    def build(self, models: ModelBuilder) -> Model:
        server = XinferenceServer(self)
        if self.kind == "llm":  # found or launched now, on the server
            # The response cache is keyed by the spec (the model name and launch settings), not the uid.
            return LLM(self, XinferenceChat(server), models.response_cache())
        # No cache or prefixes in the route: the wrapper applies both, under this spec's fingerprint.
        return EmbeddingModel(self, XinferenceEmbedding(server), models.embedding_cache())


T = TypeVar("T")
MODEL_TYPES = {"embedder": "embedding", "llm": "LLM", "reranker": "rerank"}


class XinferenceServer:
    """One model of models.yaml on its Xinference server."""

    def __init__(self, spec: XinferenceSpec) -> None:
        self.spec = spec
        self.name = expand_env(str(spec.xinference))
        self.endpoint = spec.resolved_endpoint() or ""
        self.model_type = MODEL_TYPES[spec.kind]
        self.uid: str | None = None  # the model on the server, once found or launched
        self.launched: str | None = None  # the uid this process launched, to terminate at close
        self._error: str | None = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        from xinference_client import RESTfulClient

        api_key = os.environ.get(self.spec.api_key_env) if self.spec.api_key_env else None
        return RESTfulClient(self.endpoint, api_key=api_key)

    def model_uid(self) -> str:
        """The uid of a running model of this name, launching one when none runs. A failure is
        remembered: every later call raises the same ModelError without asking the server again."""
        with self._lock:
            if self.uid is None:
                if self._error is not None:
                    raise ModelError(self._error)
                try:
                    self.uid = in_thread(self._find_or_launch, self.spec.launch_timeout)
                except Exception as error:
                    detail = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
                    self._error = redact(
                        f"xinference model '{self.name}' at {self.endpoint}: {detail}", tuple(self.spec.requires_env)
                    )
                    raise ModelError(self._error) from error
            return self.uid

    def running(self, client: Any) -> str | None:
        """The uid of a running model with this name and type whose launch settings do not
        contradict the spec's."""
        wanted = self.spec.launch_settings()
        for uid, info in sorted(client.list_models().items()):
            if info.get("model_name") != self.name or info.get("model_type", self.model_type) != self.model_type:
                continue
            if all(info.get(k) in (None, v) or str(info.get(k)) == str(v) for k, v in wanted.items()):
                return str(uid)
        return None

    def _find_or_launch(self) -> str:
        client = self.client()
        try:
            uid = self.running(client)
            if uid is not None:
                return uid
            uid = f"{self.name}-{secrets.token_hex(4)}"
            self.launched = uid  # before the call: a launch that outlives its timeout is still ours
            try:
                return str(
                    client.launch_model(
                        model_name=self.name, model_type=self.model_type, model_uid=uid, **self.spec.launch_settings()
                    )
                )
            except Exception:
                self.launched = None
                other = self.running(client)  # another process may have launched it meanwhile
                if other is None:
                    raise
                return other
        finally:
            client.close()

    def close(self) -> None:
        """Terminate the model if this process launched it; a model found running stays."""
        uid, self.launched = self.launched, None
        if uid is None:
            return

        def terminate() -> None:
            client = self.client()
            try:
                client.terminate_model(uid)
            finally:
                client.close()

        try:
            in_thread(terminate, max(self.spec.timeout, 60.0))
        except Exception:  # best effort at session end: the results are already stored
            pass
        self.uid = None

    def route(self) -> LitellmSpec:
        """The spec that reaches the running model through the server's OpenAI-compatible API."""
        return cast("LitellmSpec", self.spec.route(self.model_uid()))


class XinferenceEmbedding(EmbeddingProvider):
    """Finds or launches its model on the first text the embedding cache cannot serve, then
    embeds batches through litellm's OpenAI route to it."""

    def __init__(self, server: XinferenceServer) -> None:
        self.server = server
        self._route: LitellmEmbedding | None = None

    @property
    def route(self) -> LitellmEmbedding:
        if self._route is None:
            from ragmatrix.models.providers.litellm_embedder import LitellmEmbedding

            self._route = LitellmEmbedding(self.server.route())
        return self._route

    def load(self) -> None:
        self.route  # noqa: B018 - found or launched before the clock starts: a launch is not an encode

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        return await self.route.aembed(texts)

    def classify(self, error: BaseException) -> Failure:
        return self.route.classify(error)

    def device(self) -> Device:
        return remote(self.server.endpoint)

    def close(self) -> None:
        self.server.close()


class XinferenceChat(ChatProvider):
    """An LLM on Xinference, chatting through litellm's OpenAI route. The model is found or
    launched when it is made, that is when the first test that needs it runs."""

    def __init__(self, server: XinferenceServer) -> None:
        from ragmatrix.models.providers.litellm_chat import LitellmChat

        self.server = server
        try:
            self.route: LitellmChat = LitellmChat(server.route())
        except Exception:
            server.close()  # a model launched for a provider never made is not left running
            raise

    async def complete(self, messages: Messages, timeout: float) -> tuple[str, dict[str, Any], float | None]:
        return await self.route.complete(messages, timeout)

    def classify(self, error: BaseException) -> Failure:
        return self.route.classify(error)

    def device(self) -> Device:
        return remote(self.server.endpoint)

    def close(self) -> None:
        self.server.close()


def in_thread(function: Callable[[], T], timeout: float) -> T:
    """`function()` run in a daemon thread, waited for at most `timeout` seconds: a server that
    hangs cannot hang the session, nor keep the interpreter from exiting."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed to the caller
            outcome["error"] = error

    thread = threading.Thread(target=target, name="xinference-client", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer after {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]

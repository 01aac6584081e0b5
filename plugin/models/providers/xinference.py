"""`xinference: <model name>` with `endpoint:`: an LLM or an embedder on an Xinference server,
found running there or launched, and terminated at the end only when this process launched it.
Requests go to the server's OpenAI-compatible API through litellm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from plugin.models.providers import provider
from plugin.models.spec import EmbedderSpec, ModelSpec, expand_env, probe_server

if TYPE_CHECKING:
    from plugin.models.protocols import Model
    from plugin.models.registry import Registry

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

    def build(self, models: Registry) -> Model:
        from plugin.models.xinference_provider import XinferenceChatModel, XinferenceEmbedder

        if self.kind == "llm":  # found or launched now, on the server
            return XinferenceChatModel(self, models.response_cache())
        return XinferenceEmbedder(self, models.embedding_cache())

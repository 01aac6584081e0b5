"""`litellm: <provider>/<model>` with `kind: llm`: chat with any API litellm supports, or with
any OpenAI-compatible server named by `api_base`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from plugin.models.providers import provider
from plugin.models.spec import ModelSpec, expand_env, probe_server

if TYPE_CHECKING:
    from plugin.models.protocols import Model
    from plugin.models.registry import Registry


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

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        return super().claims(entry) and entry.get("kind") != "embedder"

    def build(self, models: Registry) -> Model:
        from plugin.models.chat import ChatModel
        from plugin.models.litellm_provider import LitellmChat

        return ChatModel(self, LitellmChat(self), models.response_cache())

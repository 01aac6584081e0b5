"""An ensemble of LLM judges: a model of its own in the matrix, made of its members.

It holds the built member models and the rule that combines their scores (`vote` or `mean`);
the judging itself is the family's (see `plugin.zelo.judges`). Each member keeps its
own concurrency limit, timeouts, retries and response cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plugin.models.providers.ensemble import EnsembleSpec


class Ensemble:
    kind = "ensemble"

    def __init__(self, spec: EnsembleSpec, members: list[Any]) -> None:
        self.spec = spec
        self.id = spec.id
        self.members = members
        self.combine = spec.combine

    def close(self) -> None:
        pass  # the members are models of the registry, closed there

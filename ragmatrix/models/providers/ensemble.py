"""`kind: ensemble` with `ensemble: [id, id, ...]`: LLMs of the same file judging together,
their scores combined by `combine: vote` (the sign vote), `zbench_vote` (zbench's rule: a tie
votes for the first document) or `mean`. It joins the matrix only
when every member is available.

The built `Ensemble` holds the member models and the rule that combines their scores; the judging
itself is the family's (see `ragmatrix.zelo.judges`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import PrivateAttr, model_validator

from ragmatrix.models.providers import provider
from ragmatrix.models.spec import ModelSpec

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder

SHAPE = "an ensemble is of kind ensemble and lists its members: ensemble: [id, id, ...]"


@provider("ensemble")
class EnsembleSpec(ModelSpec):
    provider: Literal["ensemble"] = "ensemble"
    key: ClassVar[str | None] = "ensemble"
    precedence: ClassVar[int] = 1
    kinds: ClassVar[tuple[str, ...]] = ("ensemble",)
    describe: ClassVar[str] = "an ensemble"
    ensemble: list[str] | None = None  # the ids of its member LLMs in this file
    names: ClassVar[frozenset[str]] = ModelSpec.names | {"ensemble"}
    # how the members' scores are combined (see ragmatrix.zelo.judges)
    combine: Literal["vote", "zbench_vote", "mean"] = "vote"

    # The member specs, attached by `load_models` from the rest of the file.
    _members: list[ModelSpec] = PrivateAttr(default_factory=list)

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        return entry.get("ensemble") is not None or entry.get("kind") == "ensemble"

    @classmethod
    def foreign_field(cls, name: str, owners: list[str]) -> str:
        return f"an ensemble is reached through its members; it takes no {name}"

    def wrong_kind(self) -> str:
        return SHAPE

    @model_validator(mode="after")
    def check_members(self) -> EnsembleSpec:
        if self.kind != "ensemble" or not self.ensemble:
            raise ValueError(SHAPE)
        if len(self.ensemble) < 2 or len(set(self.ensemble)) != len(self.ensemble):
            raise ValueError("an ensemble needs at least two different members")
        return self

    @property
    def members(self) -> list[ModelSpec]:
        return list(self._members)

    def member_ids(self) -> list[str]:
        return list(self.ensemble or ())

    def attach_members(self, members: list[ModelSpec]) -> None:
        self._members = list(members)

    def unavailable(self, probe: bool = True) -> str | None:
        # Every member is needed: without one, it would be another judge under the same name.
        for member in self.members:
            reason = member.unavailable(probe)
            if reason:
                return f"member {member.id}: {reason}"
        return super().unavailable(probe)

    def fingerprint(self) -> dict[str, Any]:
        members = [m.output_fingerprint() for m in self._members] if self._members else self.ensemble
        return {"provider": "ensemble", "combine": self.combine, "members": members}

    def build(self, models: ModelBuilder) -> Model:
        return Ensemble(self, [models.build(member) for member in self.members])


class Ensemble:
    """Each member keeps its own concurrency limit, timeouts, retries and response cache."""

    kind = "ensemble"

    def __init__(self, spec: EnsembleSpec, members: list[Any]) -> None:
        self.spec = spec
        self.id = spec.id
        self.members = members
        self.combine = spec.combine

    def close(self) -> None:
        pass  # the members are models of the registry, closed there

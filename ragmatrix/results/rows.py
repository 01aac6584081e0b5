"""Typed results: one `Row` per benchmark item, holding one `Iteration` per repetition.

The runner builds rows, the store validates them when it loads a file, and the leaderboard,
the report and the command line read them through these models, never through raw dicts.
A family's own details (RSS's per-length scores, zELO's battles) stay in the iteration as
extra fields; the family's `details` model reads them where they are needed.

Numbers keep their JSON type (an int stays an int), so loading and writing back a row gives
the same line: compaction must not churn committed result files.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Number = int | float


class Iteration(BaseModel):
    """One repetition of an item: a score (valid or not), or an error with no score."""

    model_config = ConfigDict(extra="allow")

    score: Number | None = None
    valid: bool | None = None
    error: str | None = None
    invalid_reason: str | None = None
    # name -> value, for families that report several metrics besides the headline score
    metrics: dict[str, Any] | None = None
    duration_s: Number | None = None

    @property
    def details(self) -> dict[str, Any]:
        """The family's own fields of this iteration."""
        return dict(self.model_extra or {})

    @property
    def invalid_answers(self) -> int:
        """The answers of this iteration that could not be used: those its family counted
        (`invalid_answers`, as a zELO judge's many judgements do), and at least one when the
        iteration itself is invalid. An error is no answer: 0."""
        if self.error is not None or self.score is None:
            return 0
        counted = (self.model_extra or {}).get("invalid_answers")
        counted = counted if isinstance(counted, int) and not isinstance(counted, bool) and counted > 0 else 0
        return max(counted, int(self.valid is False))

    def numeric_metrics(self) -> dict[str, float]:
        return {
            name: float(value)
            for name, value in (self.metrics or {}).items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        }


class Row(BaseModel):
    """What one item produced, as stored in `<results>/<family>.jsonl`."""

    model_config = ConfigDict(extra="allow")

    key: str
    family: str
    test: str
    model: str
    case: str
    variant: str = ""
    item: str
    scoring_version: int | str
    status: Literal["ok", "error"]
    # An item with any error has no score: a partial mean would hide the failure.
    score: Number | None = None
    iterations: list[Iteration] = Field(default_factory=list)
    n_iterations: int | None = None
    errors: int = 0
    invalid: int = 0
    usage: dict[str, Number] = Field(default_factory=dict)
    duration_s: Number | None = None
    recorded_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as stored: only the fields it was given, so a loaded row writes back as it was."""
        return self.model_dump(mode="json", exclude_unset=True)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def identity(self) -> tuple[str, str, str]:
        """What a row is a result of. A newer row with the same identity replaces an older one."""
        return (self.test, self.model, self.item)

    @property
    def iteration_count(self) -> int:
        return self.n_iterations if self.n_iterations is not None else len(self.iterations)

    def scored_iterations(self) -> list[Iteration]:
        """The iterations that carry a score (invalid answers included: they score 0); none for
        an error row, which has no score."""
        if not self.ok:
            return []
        return [entry for entry in self.iterations if entry.score is not None]

    def item_score(self) -> float | None:
        """The mean over the scored iterations; None for an error row."""
        scores = [float(entry.score) for entry in self.scored_iterations() if entry.score is not None]
        return sum(scores) / len(scores) if scores else None

    def item_metrics(self) -> dict[str, float]:
        """Each metric's mean over the iterations that report it."""
        sums: dict[str, list[float]] = {}
        for entry in self.iterations:
            for name, value in entry.numeric_metrics().items():
                sums.setdefault(name, []).append(value)
        return {name: sum(values) / len(values) for name, values in sums.items()}

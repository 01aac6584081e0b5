"""Typed results: one `Row` per benchmark item, holding one `Iteration` per repetition.

The runner builds rows, the store validates them when it loads a file, and the leaderboard,
the report and the command line read them through these models, never through raw dicts.
A family's own details (RSS's per-length scores, zELO's battles) stay in the iteration as
extra fields; the family's `details` model reads them where they are needed.

Numbers keep their JSON type (an int stays an int), so loading and writing back a row gives
the same line: compaction must not churn committed result files.

Every row written carries its `provenance`: the row format it is written in (`ROW_FORMAT`), the
ragmatrix version, and the benchmark repository's commit. Rows of an older format are read
through one converter (`Row._from_older_format`), and written back as they were read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from ragmatrix.foundations.data_model import DataModel, empty_list

Number = int | float

# The format rows are written in. 1: rows before provenance was stored; 2: rows with it.
ROW_FORMAT = 2


class Iteration(DataModel):
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


class Provenance(DataModel):
    """Where a row comes from. A row of format 1 has none stored: it reads as format 1, with
    nothing else known."""

    model_config = ConfigDict(extra="allow")

    format: int
    ragmatrix: str | None = None  # the package version that wrote the row
    commit: str | None = None  # the benchmark repository's HEAD; None outside git
    dirty: bool | None = None  # the checkout differed from that commit (results aside)

    def label(self) -> str:
        """`format 2, ragmatrix 0.1.0, commit 1a2b3c4 (dirty)`, or `format 1` for an old row."""
        parts = [f"format {self.format}"]
        if self.ragmatrix:
            parts.append(f"ragmatrix {self.ragmatrix}")
        if self.commit:
            parts.append(f"commit {self.commit[:12]}" + (" (dirty)" if self.dirty else ""))
        elif self.format >= 2:
            parts.append("no git commit")
        return ", ".join(parts)


def _format_1() -> Provenance:
    return Provenance(format=1)


class Row(DataModel):
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
    iterations: list[Iteration] = Field(default_factory=empty_list)
    n_iterations: int | None = None
    errors: int = 0
    invalid: int = 0
    usage: dict[str, Number] = Field(default_factory=dict)
    duration_s: Number | None = None
    recorded_at: str | None = None
    # Not part of the result key: the same result recorded by another version is the same result.
    provenance: Provenance = Field(default_factory=_format_1)

    @model_validator(mode="after")
    def _from_older_format(self) -> Row:
        """The one converter of stored rows: a row of an older format, as this format reads it.

        Format 1 (no `provenance`) holds every field format 2 has but that one, which reads as
        `format 1` and is not written back, so old rows keep their lines; a later format that
        renames a field converts it here, from the row's extra fields. A row of a format newer
        than this version knows is refused, naming both."""
        if self.provenance.format > ROW_FORMAT:
            raise ValueError(
                f"row format {self.provenance.format} is newer than this ragmatrix reads ({ROW_FORMAT}); "
                "upgrade ragmatrix"
            )
        return self

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

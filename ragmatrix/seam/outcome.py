"""What one iteration of a benchmark item produced: a score, an invalid answer, or an error."""

from __future__ import annotations

from typing import Any


class Outcome:
    """A scored iteration.

    `score` is in [0, 1] for yes/no families, or the family's own scale. An invalid answer (a
    format violation, garbage from the model) scores 0 but is counted apart; it is never
    mistaken for a model error, which is recorded as an error with no score at all. An iteration
    that reads many answers (a zELO judge's judgements) says how many were invalid in the detail
    `invalid_answers`: the leaderboard counts each, even where the iteration itself is valid.
    """

    __slots__ = ("score", "valid", "details")

    def __init__(self, score: float | None, valid: bool = True, **details: Any) -> None:
        self.score = None if score is None else float(score)
        self.valid = valid
        self.details = details

    @classmethod
    def invalid(cls, reason: str, **details: Any) -> Outcome:
        return cls(0.0, valid=False, invalid_reason=reason, **details)

    def to_json(self) -> dict[str, Any]:
        return {"score": self.score, "valid": self.valid, **self.details}

    def __repr__(self) -> str:
        return f"Outcome(score={self.score!r}, valid={self.valid!r}, details={self.details!r})"

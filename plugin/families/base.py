"""The family descriptor: every fact about a family that the plugin, the store, the terminal and
the report need, declared in one object by the family's own module.

A family module (or package) under `plugin/families/` declares `FAMILY = Family(...)`; the
registry in `plugin.families` finds it. Nothing else in the plugin names a family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from plugin.case import Case


@dataclass(frozen=True)
class Headline:
    """The one number a family ranks models by."""

    metric: str  # what the score is, in a few words: "accuracy", "file nDCG@10"
    description: str  # one sentence for the report
    scale: str = "0..1"  # shown beside every table of the family: "0..1", "RSS x500"
    higher_is_better: bool = True


@dataclass(frozen=True)
class Plot:
    """A family's own plot in the report. `draw(out_dir, table, palette)` writes its PNGs and
    returns them; `patterns` are the file names it may write, so an old report's are removed."""

    patterns: tuple[str, ...]
    draw: Callable[[Path, Any, dict[str, Any]], list[Path]]


@dataclass(frozen=True)
class Family:
    name: str
    # Bumped whenever scoring changes, so that stored results are recomputed.
    scoring_version: int | str
    # Validates an expanded case: {"input": ..., "expected": ...}.
    case_schema: type[BaseModel]
    headline: Headline
    # Input fields only an LLM reads: their variants collapse for models that read no prompt.
    prompt_fields: tuple[str, ...] = ()
    # Input fields whose mappings are plain values, not sets of variants.
    plain_input_fields: tuple[str, ...] = ()
    # The fingerprint of the corpus or dataset a case reads; part of its result key.
    corpus_fingerprint: Callable[[Case], str] | None = None
    # The model of the details an iteration records, where the report or the CLI reads them.
    details: type[BaseModel] | None = None
    # Case metadata (or input) fields the leaderboard breaks the headline down by.
    breakdowns: tuple[str, ...] = ()
    # The first-round chat requests an LLM's item of a case makes, as a pure function of the
    # case and the model: the scheduler sends them for every item before the items run, at
    # each model's full concurrency. Follow-up rounds stay inside the item.
    first_requests: Callable[[Case, Any], list[list[dict[str, str]]]] | None = None
    # The same for an embedder's item: the (queries, documents) it embeds, batched across
    # items by the scheduler.
    first_texts: Callable[[Case, Any], tuple[list[str], list[str]]] | None = None
    # Extra report blocks for this family: `section(table) -> blocks`.
    report_sections: Sequence[Callable[[Any], list[Any]]] = field(default=())
    plots: Sequence[Plot] = field(default=())

    def details_of(self, iteration: Any) -> BaseModel | None:
        """An iteration's details as this family's model, or None when it has none or they do
        not validate (an old row, an error)."""
        if self.details is None:
            return None
        data = iteration if isinstance(iteration, dict) else getattr(iteration, "model_extra", None) or {}
        try:
            return self.details.model_validate(data)
        except ValueError:
            return None

"""The family descriptor: every fact about a family that the plugin, the store, the terminal and
the report need, declared in one object by the family's own module.

A family module (or package) under `ragmatrix/families/` declares `FAMILY = Family(...)`; the
registry in `ragmatrix.families` finds it. Nothing else in the plugin names a family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from ragmatrix.case import Case


@dataclass(frozen=True)
class Headline:
    """The one number a family ranks models by."""

    metric: str  # what the score is, in a few words: "accuracy", "file nDCG@10"
    description: str  # one sentence for the report
    scale: str = "0..1"  # shown beside every table of the family: "0..1", "RSS x500"
    higher_is_better: bool = True
    # Every score is 0 or 1 (a yes/no outcome): Wilson intervals and McNemar's test. False: a
    # continuous score, never a Wilson interval, even when its values happen to be 0 or 1.
    binary: bool = False

    @property
    def digits(self) -> int:
        """Decimals to show: three on a 0..1 scale, one on a wider one (RSS x500)."""
        return 3 if self.scale == "0..1" else 1


@dataclass(frozen=True)
class Plot:
    """A family's own plot in the report. `draw(out_dir, table, context)` writes its PNGs and
    returns them (`context` has the report's palette and options); `patterns` are the file
    names it may write, so that an old report's are removed."""

    patterns: tuple[str, ...]
    draw: Callable[[Path, Any, Any], list[Path]]


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
    # Rewrites a case's raw input before its variants are expanded (a format's own layout
    # into the family's), so that the rewritten fields expand, collapse and key as written.
    normalise_input: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # For a family whose cases may be checked by an evaluator LLM: the evaluator's prompt for
    # a case, given the configured one (None: the default), or None where the case needs no
    # evaluator. A test taking the `evaluator` fixture then keys such a case by the
    # evaluator's fingerprint and this prompt, and skips it when no evaluator is available.
    evaluator_prompt: Callable[[Case, str | None], str | None] | None = None
    # The fingerprint of the corpus or dataset a case reads; part of its result key.
    corpus_fingerprint: Callable[[Case], str] | None = None
    # The model of the details an iteration records, where the report or the CLI reads them.
    details: type[BaseModel] | None = None
    # Metrics that are yes/no outcomes (Wilson intervals); every other metric is continuous.
    binary_metrics: tuple[str, ...] = ()
    # Case metadata (or input) fields the leaderboard breaks the headline down by.
    breakdowns: tuple[str, ...] = ()
    # The first-round chat requests an LLM's item of a case makes, as a pure function of the
    # case and the model: the scheduler sends them for every item before the items run, at
    # each model's full concurrency. Follow-up rounds stay inside the item.
    first_requests: Callable[[Case, Any], list[list[dict[str, str]]]] | None = None
    # The same for an embedder's item: the (queries, documents) it embeds, batched across
    # items by the scheduler.
    first_texts: Callable[[Case, Any], tuple[list[str], list[str]]] | None = None
    # A case that names a source of cases (a query file, a dataset) as the raw cases it holds:
    # `case_source(raw, directory) -> (raw cases, [(case name, problem), ...])`. A raw case that
    # names no source is returned as it is. A pair that is a `ragmatrix.case.Skipped` is a case
    # left out with a warning line instead of a problem (the source's own tool skips it).
    case_source: Callable[[dict[str, Any], Path], tuple[list[dict[str, Any]], list[tuple[str, str]]]] | None = None
    # Checks of an expanded case at collection, against what it reads (its corpus): each line is
    # a problem shown with the case, and the case does not run.
    check: Callable[[Case], list[str]] | None = None
    # Extra report blocks for this family: `section(table, images) -> blocks`, where `images`
    # are the file names its plots drew.
    report_sections: Sequence[Callable[[Any, list[str]], list[Any]]] = field(default=())
    plots: Sequence[Plot] = field(default=())
    # Lines the terminal summary shows under this family's tables (its own small tables, its
    # warnings): `terminal_notes(table) -> lines`.
    terminal_notes: Callable[[Any], list[str]] | None = None
    # Report blocks that set the family's quality beside its cost figures:
    # `section(table, costs) -> blocks`, where `costs` is a `ragmatrix.report.cost.FamilyCosts`.
    cost_sections: Sequence[Callable[[Any, Any], list[Any]]] = field(default=())

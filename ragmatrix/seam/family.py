"""The family descriptor: every fact about a family that the plugin, the store, the scheduler, the
terminal and the report need, declared in one object by the family's own module.

A family module (or package) under `ragmatrix/families/` declares `FAMILY = Family(...)`; the
registry in `ragmatrix.families` finds it. The descriptor is generic in what its case schema
validates: `Family(case_schema=RagCase, ...)` is a `Family[RagInput, RagExpected]`, and mypy
checks every callback against `Case[RagInput, RagExpected]`.

This module stands below both the families and the report: it speaks the types of the seam
(`ragmatrix.seam.case`, `ragmatrix.seam.tables`, `ragmatrix.seam.blocks`, `ragmatrix.seam.drawing`, the cost
figures and the model protocols) and imports neither side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol

from pydantic import BaseModel

from ragmatrix.models.protocols import ChatModel, Messages, Model
from ragmatrix.results.rows import Iteration
from ragmatrix.seam.case import Case, ExpectedT, InputT
from ragmatrix.seam.detail import ItemView
from ragmatrix.seam.headline import Headline

if TYPE_CHECKING:  # what a family's report callbacks take, needed only after a run's items
    from ragmatrix.cost.figures import FamilyCosts
    from ragmatrix.seam.blocks import Block
    from ragmatrix.seam.drawing import PlotContext
    from ragmatrix.seam.tables import FamilyTable

__all__ = ["CaseSchema", "Family", "Headline", "ItemView", "Plot", "Rankings", "Source"]


class CaseSchema(Protocol[InputT, ExpectedT]):
    """A family's case schema: a pydantic model of an expanded case, whose `input` and
    `expected` fields validate to the types its `Case` carries."""

    input: InputT
    expected: ExpectedT


@dataclass(frozen=True)
class Plot:
    """A family's own plot in the report. `draw(out_dir, table, context)` writes its PNGs and
    returns them (`context` has the report's palette and options); `patterns` are the file
    names it may write, so that an old report's are removed."""

    patterns: tuple[str, ...]
    draw: Callable[[Path, FamilyTable, PlotContext], list[Path]]


@dataclass(frozen=True)
class Source:
    """The benchmark a family follows, as the report and the explorer name it: what it is, where
    to read it (a paper or a repository, as a URL) and under which licence that work is."""

    follows: str  # "BioChatter's benchmark"
    reference: str  # a paper or a repository: "https://github.com/biocypher/biochatter"
    licence: str  # the licence of what is followed; "none stated" where it names none
    note: str = ""  # what is taken from it, in a few words

    def line(self) -> str:
        """`follows X (URL, licence: MIT): what is taken`, for the report and the explorer."""
        taken = f": {self.note}" if self.note else ""
        return f"follows {self.follows} ({self.reference}, licence: {self.licence}){taken}"


@dataclass(frozen=True)
class Rankings:
    """A retrieval family's rankings and judgements, as TREC run and qrels files carry them
    (`ragmatrix export --trec`): `ranked(iteration)` gives the documents an iteration ranked,
    best first, with their scores; `judged(case)` the graded relevance of the case's documents
    (a document not named is not relevant). The family's headline is nDCG@`depth` over them."""

    ranked: Callable[[Iteration], list[tuple[str, float]]]
    judged: Callable[[Case[Any, Any]], dict[str, int]]
    depth: int = 10


@dataclass(frozen=True)
class Family(Generic[InputT, ExpectedT]):
    name: str
    # Bumped whenever scoring changes, so that stored results are recomputed.
    scoring_version: int | str
    # Validates an expanded case: {"input": ..., "expected": ...}; a pydantic model.
    case_schema: type[CaseSchema[InputT, ExpectedT]]
    headline: Headline
    # The benchmark the family follows; None for a family of its own.
    source: Source | None = None
    # Input fields only an LLM reads: their variants collapse for models that read no prompt.
    prompt_fields: tuple[str, ...] = ()
    # Input fields whose mappings are plain values, not sets of variants.
    plain_input_fields: tuple[str, ...] = ()
    # Rewrites a case's raw input (as read from YAML) before its variants are expanded (a
    # format's own layout into the family's), so that the rewritten fields expand, collapse and
    # key as written.
    normalise_input: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # For a family whose cases may be checked by an evaluator LLM: the evaluator's prompt for
    # a case, given the configured one (None: the default), or None where the case needs no
    # evaluator. A test taking the `evaluator` fixture then keys such a case by the
    # evaluator's fingerprint and this prompt, and skips it when no evaluator is available.
    evaluator_prompt: Callable[[Case[InputT, ExpectedT], str | None], str | None] | None = None
    # The fingerprint of the corpus or dataset a case reads; part of its result key.
    corpus_fingerprint: Callable[[Case[InputT, ExpectedT]], str] | None = None
    # The model of the details an iteration records, where the report or the CLI reads them.
    details: type[BaseModel] | None = None
    # Metrics that are yes/no outcomes (Wilson intervals); every other metric is continuous.
    binary_metrics: tuple[str, ...] = ()
    # Case metadata (or input) fields the leaderboard breaks the headline down by.
    breakdowns: tuple[str, ...] = ()
    # The first round of an LLM's item: the conversations it asks, as a pure function of the
    # case and the model. The scheduler sends them for every item before the items run, at
    # each model's full concurrency, and the test asks them through `ask` (or the family's own
    # code that calls this same function), so that what is sent ahead is what is used.
    # Follow-up rounds stay inside the item.
    first_requests: Callable[[Case[InputT, ExpectedT], Model], list[Messages]] | None = None
    # The same for an embedder's item: the (queries, documents) it embeds, batched across
    # items by the scheduler; the family's test reads its texts through this same function.
    first_texts: Callable[[Case[InputT, ExpectedT], Model], tuple[list[str], list[str]]] | None = None
    # A case that names a source of cases (a query file, a dataset) as the raw cases it holds:
    # `case_source(raw, directory) -> (raw cases, [(case name, problem), ...])`. A raw case that
    # names no source is returned as it is. A pair that is a `ragmatrix.seam.case.Skipped` is a case
    # left out with a warning line instead of a problem (the source's own tool skips it).
    case_source: Callable[[dict[str, Any], Path], tuple[list[dict[str, Any]], list[tuple[str, str]]]] | None = None
    # Checks of an expanded case at collection, against what it reads (its corpus): each line is
    # a problem shown with the case, and the case does not run.
    check: Callable[[Case[InputT, ExpectedT]], list[str]] | None = None
    # Extra report blocks for this family: `section(table, images) -> blocks`, where `images`
    # are the file names its plots drew.
    report_sections: Sequence[Callable[[FamilyTable, list[str]], list[Block]]] = field(default=())
    plots: Sequence[Plot] = field(default=())
    # Lines the terminal summary shows under this family's tables (its own small tables, its
    # warnings): `terminal_notes(table) -> lines`.
    terminal_notes: Callable[[FamilyTable], list[str]] | None = None
    # Report blocks that set the family's quality beside its cost figures:
    # `section(table, costs) -> blocks`.
    cost_sections: Sequence[Callable[[FamilyTable, FamilyCosts], list[Block]]] = field(default=())
    # What an item shows when it is opened (`ragmatrix view`, `ragmatrix show`); None: its
    # recorded fields as they are.
    item_view: ItemView | None = None
    # For a retrieval family: its rankings and judgements, for TREC run and qrels files.
    rankings: Rankings | None = None

    def __post_init__(self) -> None:
        _pydantic_model(self)  # a schema that is no pydantic model fails when the family is declared

    @property
    def schema(self) -> type[BaseModel]:
        """The case schema as the pydantic model the loader validates cases with."""
        return _pydantic_model(self)

    def ask(self, llm: ChatModel, case: Case[InputT, ExpectedT]) -> list[str]:
        """The LLM's answers to the case's first round (`first_requests`), in order: the
        requests the scheduler sent ahead, asked the one way that takes their answers."""
        if self.first_requests is None:
            raise TypeError(f"family '{self.name}' declares no first_requests to ask")
        return llm.chat_many(self.first_requests(case, llm))


def _pydantic_model(family: Family[Any, Any]) -> type[BaseModel]:
    schema = family.case_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise TypeError(f"family '{family.name}': case_schema must be a pydantic model, not {schema!r}")
    return schema

"""One expanded case, the unit a benchmark test receives, and the errors a case can raise.

This module depends on nothing else of the plugin, so that the families (which read cases)
and the loader (which builds them from YAML, and asks the families for their schemas) both
stand on it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from ragmatrix.foundations.untrusted import safe_line

# What a family's case schema validates `input` and `expected` to (`RagInput`, `RagExpected`).
InputT = TypeVar("InputT")
ExpectedT = TypeVar("ExpectedT")


class CaseInputError(Exception):
    """Input a case names cannot be read: a missing file, an empty source, too few documents.

    Raise it with one line naming the problem; the item is recorded as an error, like a model
    error, and pytest reports that line instead of a traceback.
    """


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a data file, reported as one line."""

    file: str
    case: str | None
    message: str
    family: str | None = None

    def line(self) -> str:
        """One line, whatever the file held: its control characters are escaped."""
        where = f"case '{self.case}'" if self.case else "file"
        return safe_line(f"{self.file}: {where}: {self.message}")


class Skipped(NamedTuple):
    """A case that a source of cases holds (a query of a query file) but that cannot run under
    the case's rules, as the source's own tool skips it: left out with a warning, not an error."""

    case: str
    reason: str


@dataclass(frozen=True)
class Case(Generic[InputT, ExpectedT]):
    """One expanded case: the unit a test function receives as `case`.

    Generic in what its family's schema validates: a RAG case is a
    `Case[RagInput, RagExpected]`, so that a family's functions are checked against its fields."""

    family: str
    name: str
    choices: tuple[tuple[str, str], ...]  # (input field, variant name), in YAML order
    input: InputT  # the family schema's validated input
    expected: ExpectedT
    # `input` and `expected` as written, every variant set whole: one mapping shared by all the
    # variants of a YAML case (a large suite holds its cases by the hundred thousand); `raw`
    # resolves a case's own choices from it.
    written: dict[str, Any] = field(repr=False)
    file: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)
    # The data file's folder: relative paths a case names (corpora, datasets) start here.
    # It is not part of the key, so moving a checkout does not change results.
    directory: Path = field(default=Path("."), repr=False, compare=False)
    # Input fields this case leaves out (the prompt fields, for a model that reads no prompt).
    left_out: frozenset[str] = field(default=frozenset(), repr=False)

    @property
    def raw(self) -> dict[str, Any]:
        """`input` and `expected` as written, with this case's variant chosen in each variant set."""
        chosen = dict(self.choices)
        written = self.written["input"]
        resolved = {
            key: written[key][chosen[key]] if key in chosen else value
            for key, value in written.items()
            if key not in self.left_out
        }
        return {"input": resolved, "expected": self.written["expected"]}

    @property
    def source(self) -> str:
        """The data file's name without `_data.yaml`: `-k <source>` selects this file's items."""
        name = Path(self.file).name
        return name.removesuffix("_data.yaml") if name.endswith("_data.yaml") else Path(name).stem

    @property
    def variant(self) -> str:
        return ":".join(choice for _, choice in self.choices)

    @property
    def id(self) -> str:
        """`case:choice1:choice2`, the name used in test ids, rows and `-k`."""
        return ":".join([self.name, *(choice for _, choice in self.choices)])

    def content(self) -> dict[str, Any]:
        """What goes into the result key. Variant choices are a mapping, so that reordering
        the variant fields in YAML does not change the key."""
        raw = self.raw
        return {"case": self.name, "input": raw["input"], "expected": raw["expected"], "variant": dict(self.choices)}

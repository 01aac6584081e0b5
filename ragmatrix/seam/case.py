"""One expanded case, the unit a benchmark test receives, and the errors a case can raise.

This module depends on nothing else of the plugin, so that the families (which read cases)
and the loader (which builds them from YAML, and asks the families for their schemas) both
stand on it without importing each other.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel

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


@dataclass(frozen=True, slots=True)
class Case(Generic[InputT, ExpectedT]):
    """One expanded case: the unit a test function receives as `case`.

    Generic in what its family's schema validates: a RAG case is a
    `Case[RagInput, RagExpected]`, so that a family's functions are checked against its fields.

    A case keeps what it was written as, and its `input` and `expected` are validated when they
    are read: a large suite holds its cases by the hundred thousand, most of them never read
    (the wordings a model that reads no prompt skips), and a validated pair was half of what
    a case held. The loader validated each one already, so reading one cannot fail, and the
    recent reads start from its validation (`keep_validated`)."""

    family: str
    name: str
    choices: tuple[tuple[str, str], ...]  # (input field, variant name), in YAML order
    # The family's schema: a pydantic model of `input` and `expected` (`RagCase`).
    schema: type[BaseModel] = field(repr=False)
    # `input` and `expected` as written, every variant set whole: one mapping shared by all the
    # variants of a YAML case; `raw` resolves a case's own choices from it.
    written: dict[str, Any] = field(repr=False)
    file: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)
    # The data file's folder: relative paths a case names (corpora, datasets) start here.
    # It is not part of the key, so moving a checkout does not change results.
    directory: Path = field(default=Path("."), repr=False, compare=False)
    # Input fields this case leaves out (the prompt fields, for a model that reads no prompt).
    left_out: frozenset[str] = field(default=frozenset(), repr=False)
    # The choices `input` is validated with: the case's own, or, for a case collapsed for a
    # model that reads no prompt, those of the wording it was collapsed from (None: its own).
    validated_as: tuple[tuple[str, str], ...] | None = field(default=None, repr=False, compare=False)

    @property
    def input(self) -> InputT:
        """The family schema's validated input."""
        return _RECENTLY_READ.fields_of(self)["input"]  # type: ignore[no-any-return]

    @property
    def expected(self) -> ExpectedT:
        return _RECENTLY_READ.fields_of(self)["expected"]  # type: ignore[no-any-return]

    def validated(self) -> dict[str, Any]:
        """The schema's fields (`input`, `expected`), validated anew from what was written."""
        resolved = self._resolved(self.validated_as or self.choices, frozenset())
        return _fields(self.schema.model_validate({"input": resolved, "expected": self.written["expected"]}))

    def keep_validated(self, validated: BaseModel) -> None:
        """Keep the loader's validation of this very case (its `validated()`) for its first
        read, while the recent reads have room: a suite no larger than they are validates each
        case once per run, not once as it loads and again as an item reads it, and a larger one
        keeps its first cases (read first), never churning through them as it loads."""
        if _RECENTLY_READ.has_room():
            _RECENTLY_READ.keep(self, _fields(validated))

    @property
    def raw(self) -> dict[str, Any]:
        """`input` and `expected` as written, with this case's variant chosen in each variant set."""
        return {"input": self._resolved(self.choices, self.left_out), "expected": self.written["expected"]}

    def _resolved(self, choices: tuple[tuple[str, str], ...], left_out: frozenset[str]) -> dict[str, Any]:
        chosen = dict(choices)
        written = self.written["input"]
        return {
            key: written[key][chosen[key]] if key in chosen else value
            for key, value in written.items()
            if key not in left_out
        }

    @property
    def source(self) -> str:
        """The data file's name without `_data.yaml`: `-k <source>` selects this file's items."""
        return _source_of(self.file)

    @property
    def variant(self) -> str:
        return ":".join(choice for _, choice in self.choices)

    @property
    def id(self) -> str:
        """`case:choice1:choice2`, the name used in test ids, rows and `-k`."""
        if not self.choices:
            return self.name
        return self.name + ":" + ":".join([choice for _, choice in self.choices])

    def content(self) -> dict[str, Any]:
        """What goes into the result key. Variant choices are a mapping, so that reordering
        the variant fields in YAML does not change the key."""
        raw = self.raw
        return {"case": self.name, "input": raw["input"], "expected": raw["expected"], "variant": dict(self.choices)}


@functools.lru_cache(maxsize=1024)
def _source_of(file: str) -> str:
    """Worked out once per data file: every item of a file asks for it at collection."""
    name = Path(file).name
    return name.removesuffix("_data.yaml") if name.endswith("_data.yaml") else Path(name).stem


class _RecentlyRead:
    """The validated fields of the cases read last, so that an item's several reads of its
    case validate it once. Bounded, first in first out: a run reads its items' cases a window
    at a time, in order."""

    def __init__(self, size: int) -> None:
        self.size = size
        # id(case) -> (case, fields); holding the case keeps its id from being reused
        self._held: OrderedDict[int, tuple[Case[Any, Any], dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()  # items, the scheduler's thread and the loop's read cases

    def fields_of(self, case: Case[Any, Any]) -> dict[str, Any]:
        held = self._held.get(id(case))  # one dict read: atomic under the GIL
        if held is not None and held[0] is case:
            return held[1]
        fields = case.validated()
        self.keep(case, fields)
        return fields

    def has_room(self) -> bool:
        return len(self._held) < self.size

    def keep(self, case: Case[Any, Any], fields: dict[str, Any]) -> None:
        with self._lock:
            self._held[id(case)] = (case, fields)
            if len(self._held) > self.size:
                self._held.popitem(last=False)


_RECENTLY_READ = _RecentlyRead(4096)


def _fields(validated: BaseModel) -> dict[str, Any]:
    """A validated model's fields, as `dict(model)` gives them (its extra fields too), copied
    from what it holds rather than iterated: a large suite validates every case as it loads."""
    fields = validated.__dict__.copy()
    if validated.__pydantic_extra__:
        fields.update(validated.__pydantic_extra__)
    return fields

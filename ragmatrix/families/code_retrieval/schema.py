"""What a code retrieval case says: its query (the input) and where the answer is (expected), as
the family's case schema validates them. The Rust embedding benchmark's names are read too:
`Code`, `Doc`, `Simple` ... `ExtraHard`, and its `answer_regions`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ragmatrix.families.code_retrieval.chunking import Chunking
from ragmatrix.families.code_retrieval.corpus import CorpusSpec
from ragmatrix.foundations.data_model import DataModel, empty_list
from ragmatrix.seam.case import Case

# Difficulty levels, and the names the Rust embedding benchmark writes for them.
DIFFICULTIES = ("easy", "medium", "hard", "extra_hard")
_DIFFICULTY_NAMES = {"simple": "easy", "extrahard": "extra_hard", "extra-hard": "extra_hard"}
# A query type or difficulty the case does not give: rows then carry none, and the
# leaderboard's breakdowns leave the case out of that breakdown.
UNSPECIFIED: Literal["unspecified"] = "unspecified"


class CodeQuery(DataModel):
    model_config = ConfigDict(extra="forbid")

    corpus: CorpusSpec
    chunking: Chunking  # a dict of named strategies in the YAML: one variant each
    query: str = Field(min_length=1)
    # asks for code, or for what its docs say
    query_type: Literal["code", "doc", "unspecified"] = UNSPECIFIED
    difficulty: Literal["easy", "medium", "hard", "extra_hard", "unspecified"] = UNSPECIFIED
    # all: rank every chunk; by_type: a code query ranks code files, a doc query documentation
    search: Literal["all", "by_type"] = "all"

    @model_validator(mode="after")
    def typed_when_by_type(self) -> CodeQuery:
        if self.search == "by_type" and self.query_type == UNSPECIFIED:
            raise ValueError("search: by_type needs a query_type (code or doc)")
        return self

    @field_validator("query_type", "difficulty", mode="before")
    @classmethod
    def lower_case(cls, value: Any) -> Any:
        """`Code`, `Doc`, `Simple` ... `ExtraHard` as the Rust embedding benchmark writes them."""
        if not isinstance(value, str):
            return value
        value = value.strip().lower()
        return _DIFFICULTY_NAMES.get(value, value)


_SPAN = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_span(value: object) -> tuple[int, int]:
    """`"120-140"`, `120` or `[120, 140]` as a 1-based inclusive line range."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(type(v) is int for v in value):
        value = f"{value[0]}-{value[1]}"
    match = _SPAN.match(str(value)) if isinstance(value, int | str) and not isinstance(value, bool) else None
    if match is None:
        raise ValueError(f"line range {value!r}: write it as 'start-end', [start, end] or one line number")
    start = int(match.group(1))
    end = int(match.group(2) or start)
    if start < 1 or end < start:
        raise ValueError(f"line range {value!r}: lines start at 1 and the end comes after the start")
    return start, end


class AnswerRegion(DataModel):
    """One place the answer may be (the Rust embedding benchmark's `answer_regions`): a chunk
    matches when it contains one of `keywords` (if given) and overlaps `lines` (if given), and
    comes from a file whose path contains `file_pattern`, or, with no pattern, from an expected
    file. A region with neither keywords nor lines matches nothing, as in that tool."""

    model_config = ConfigDict(extra="forbid")

    keywords: list[str] = Field(default_factory=empty_list)
    lines: tuple[int, int] | None = None
    file_pattern: str | None = None

    @field_validator("lines", mode="before")
    @classmethod
    def span(cls, value: Any) -> Any:
        return None if value is None else parse_span(value)


class CodeExpected(DataModel):
    model_config = ConfigDict(extra="forbid")

    expected_files: list[str] = Field(min_length=1)  # relative to the corpus root, or a unique suffix
    answer_keywords: list[str] = Field(default_factory=empty_list)  # case-sensitive
    answer_lines: dict[str, list[tuple[int, int]]] = Field(default_factory=dict)  # file -> line ranges
    # Where given, these alone say where the answer is (any region); [] means no answer ground truth.
    answer_regions: list[AnswerRegion] | None = None

    @field_validator("answer_lines", mode="before")
    @classmethod
    def spans(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {
            path: [parse_span(s) for s in (spans if isinstance(spans, list) else [spans])]
            for path, spans in value.items()
        }

    @model_validator(mode="after")
    def answer_named(self) -> CodeExpected:
        if self.answer_regions is None and not self.answer_keywords and not self.answer_lines:
            raise ValueError("give answer_keywords or answer_lines (or both), or answer_regions")
        if self.answer_regions is not None and (self.answer_keywords or self.answer_lines):
            raise ValueError("give answer_regions, or answer_keywords and answer_lines, not both")
        stray = [path for path in self.answer_lines if path not in self.expected_files]
        if stray:
            raise ValueError(f"answer_lines names {stray[0]}, which is not in expected_files")
        return self

    @property
    def has_answers(self) -> bool:
        return self.answer_regions != []


class CodeRetrievalCase(DataModel):
    model_config = ConfigDict(extra="forbid")
    input: CodeQuery
    expected: CodeExpected


# A case of this family, as its test receives it.
CodeItem = Case[CodeQuery, CodeExpected]

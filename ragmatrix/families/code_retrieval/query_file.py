"""The Rust embedding benchmark's query file, read as it is: each of its queries becomes a case.

A case of the data file names the query file with its corpus and chunking:

    - case: ripgrep
      input:
        corpus: {path: ../../codebases/ripgrep, include: ["**/*.rs", "**/*.md"]}
        chunking: *chunking
        query_file: queries/ripgrep.json     # relative to the data file's folder
        search: by_type                      # optional, for every query
      tags: [rust]                           # optional, for every query

The file is JSON: `{"metadata": {"name", "description", "version"}, "queries": [...]}`. Each
query has `query`, `expected_files` (paths or unique suffixes), `description`, optionally
`query_type` (`Code` | `Doc`) and `difficulty` (`Simple` | `Medium` | `Hard` | `ExtraHard`),
"unspecified" when missing, and optionally `answer_keywords` and `answer_lines`
(`[start, end]`), or `answer_regions` (each with `keywords`, `lines` and `file_pattern`). The
tool's rules for answers are kept: where `answer_regions` is given it alone counts (any region),
otherwise the keywords and the lines form one region, and within a region every criterion given
must hold.

Each query becomes the case `<case>.<slug of its query>`; every error of a query is listed on
one line with it. A query that cannot be scored under the case's rules (an expected file that
is not in the corpus, whose suffix is ambiguous, or that `search: by_type` does not rank for the
query's type) is skipped, as the tool skips it: one `Skipped` line each, and the file's other
queries run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from ragmatrix.families.code_retrieval.corpus import CorpusSpec, session_corpus
from ragmatrix.families.code_retrieval.retrieval import resolve_files
from ragmatrix.foundations.data_model import DataModel, empty_list
from ragmatrix.foundations.yamlfile import error_line, field_errors
from ragmatrix.seam.case import CaseInputError, Skipped

QUERY_FILE_FIELD = "query_file"
_QUERY_TYPES = {"code", "doc"}
_DIFFICULTIES = {"simple", "medium", "hard", "extrahard", "extra_hard", "extra-hard"}


def _errors(error: ValidationError) -> list[str]:
    """Pydantic's errors as `location: message`, without their URLs."""
    return [error_line(path, message) for path, message in field_errors(error)]


class Region(DataModel):
    model_config = ConfigDict(extra="forbid")

    keywords: list[str] = Field(default_factory=empty_list)
    lines: tuple[int, int] | None = None
    file_pattern: str | None = None


class Query(DataModel):
    """One query as the Rust tool's `BenchmarkQuery` reads it (its required fields required)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    query_type: str | None = None
    difficulty: str | None = None
    expected_files: list[str] = Field(min_length=1)
    description: str
    answer_keywords: list[str] = Field(default_factory=empty_list)
    answer_lines: tuple[int, int] | None = None
    answer_regions: list[Region] = Field(default_factory=empty_list)

    @field_validator("query_type")
    @classmethod
    def known_type(cls, value: str | None) -> str | None:
        if value is not None and value.lower() not in _QUERY_TYPES:
            raise ValueError(f"'{value}' is not Code or Doc")
        return value

    @field_validator("difficulty")
    @classmethod
    def known_difficulty(cls, value: str | None) -> str | None:
        if value is not None and value.lower() not in _DIFFICULTIES:
            raise ValueError(f"'{value}' is not Simple, Medium, Hard or ExtraHard")
        return value

    def regions(self) -> list[dict[str, Any]]:
        """The answer as regions: the file's own, or its keywords and lines as one region;
        regions with no keywords and no lines are left out (they match nothing in the tool)."""
        given = self.answer_regions or [Region(keywords=self.answer_keywords, lines=self.answer_lines)]
        return [
            region.model_dump(exclude_none=True, exclude_defaults=True)
            for region in given
            if region.keywords or region.lines is not None
        ]


class QueryFile(DataModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any]
    queries: list[dict[str, Any]]

    @field_validator("metadata")
    @classmethod
    def named(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("name"), str):
            raise ValueError("metadata needs a name")
        return value


def slug(text: str, width: int = 48) -> str:
    """A case-name-safe slug of a query: `regex matcher impl.` -> `regex_matcher_impl`."""
    words = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    if len(words) > width:  # cut at a word boundary where there is one
        cut = words[: width + 1]
        words = cut.rsplit("_", 1)[0] if "_" in cut else words[:width]
    return words.rstrip("_") or "query"


def expand_query_file(raw: dict[str, Any], directory: Path) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The raw cases of a case that names a query file, and (case, problem) pairs, a query
    skipped as the tool skips it among them as a `Skipped` pair; a case naming no query file is
    returned as it is."""
    raw_input = raw.get("input")
    if not isinstance(raw_input, dict) or QUERY_FILE_FIELD not in raw_input:
        return [raw], []
    name = str(raw["case"])
    given = {k: v for k, v in raw_input.items() if k != QUERY_FILE_FIELD}
    clash = sorted(set(given) & {"query", "query_type", "difficulty"})
    if clash or "expected" in raw:
        fields = ", ".join([*clash, *(["expected"] if "expected" in raw else [])])
        return [], [(name, f"a case with a query_file takes its queries from the file: remove {fields}")]
    relative = str(raw_input[QUERY_FILE_FIELD])
    path = Path(relative) if Path(relative).is_absolute() else directory / relative
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        return [], [(name, f"query file {relative}: cannot read it: {error.strerror or error}")]
    except json.JSONDecodeError as error:
        return [], [(name, f"query file {relative}: line {error.lineno}: invalid JSON: {error.msg}")]
    try:
        file = QueryFile.model_validate(document)
    except ValidationError as error:
        return [], [(name, f"query file {relative}: {'; '.join(_errors(error))}")]
    metadata: dict[str, Any] = {k: raw[k] for k in ("tags", "domain") if k in raw}
    cases: list[dict[str, Any]] = []
    problems: list[tuple[str, str]] = []
    names: set[str] = set()
    for number, entry in enumerate(file.queries, start=1):
        text = entry.get("query") if isinstance(entry, dict) else None
        stem = f"{name}.{slug(text)}" if isinstance(text, str) and text.strip() else f"{name}.query_{number}"
        case_name, suffix = stem, 2
        while case_name in names:
            case_name, suffix = f"{stem}_{suffix}", suffix + 1
        names.add(case_name)
        try:
            query = Query.model_validate(entry)
        except ValidationError as error:
            problems.append((case_name, f"query {number} of {relative}: {'; '.join(_errors(error))}"))
            continue
        why = unscorable(query, given, directory)
        if why is not None:
            problems.append(Skipped(case_name, f"query {number} of {relative} skipped: {why}"))
            continue
        typed = {name: value for name in ("query_type", "difficulty") if (value := getattr(query, name)) is not None}
        cases.append(
            {
                "case": case_name,
                "input": {**given, "query": query.query, **typed},
                "expected": {"expected_files": query.expected_files, "answer_regions": query.regions()},
                "description": query.description,
                **metadata,
            }
        )
    return cases, problems


def unscorable(query: Query, given: dict[str, Any], directory: Path) -> str | None:
    """Why a query cannot be scored under the case's rules (the tool skips such a query), or
    None. A corpus that cannot be read, or settings that are variants, are left to the checks of
    the expanded cases."""
    search = given.get("search", "all")
    if search == "by_type" and query.query_type is None:
        return "search: by_type needs its query_type (Code or Doc)"
    try:
        corpus = session_corpus(CorpusSpec.model_validate(given.get("corpus")), directory)
    except (ValidationError, CaseInputError):
        return None
    if not isinstance(search, str):
        return None
    query_type = (query.query_type or "").lower()
    problems = resolve_files(query.expected_files, corpus, search, query_type)[1]
    return "; ".join(problems) if problems else None

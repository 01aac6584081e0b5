"""Benchmark cases: find `*_data.yaml`, validate, expand variants, name and key each case.

A data file maps a family name to a list of cases. Each case has `case` (its name), `input`
and `expected` (optional where the family's schema gives it a default). Every dict-valued
field of `input` is a set of named variants, and a case expands into the product of all
variant choices, named `case:choice1:choice2` in the order the fields appear in the YAML
(BioChatter's convention).

Problems never raise out of this module: they are collected as `Problem`s, each a single
line naming the file, the case and what is wrong, so that one bad file cannot hide the
results of the others.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from plugin.case import Case, Problem
from plugin.families import family_named

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]+$")
# libyaml's safe loader when PyYAML was built with it: every run, cached ones included, parses
# every data file, and the pure-Python parser is several times slower.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Metadata a case may carry besides its content; it never changes a result.
METADATA_FIELDS = {"domain", "tags", "description"}


class GenericCase(BaseModel):
    """Schema for a family that registers none: input and expected are free mappings."""

    model_config = ConfigDict(extra="forbid")
    input: dict[str, Any]
    expected: dict[str, Any]


def without_prompts(cases: list[Case]) -> list[Case]:
    """The cases as a model that reads no prompt (an embedder, BM25) sees them.

    Variants that differ only in prompt fields (the family schema's `prompt_fields`) collapse
    into one case, named and keyed without those choices: such a model gives the same answer
    to every wording, and counting it once per wording would inflate n and narrow its interval.
    """
    collapsed: list[Case] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for case in cases:
        family = family_named(case.family)
        prompts = set(family.prompt_fields if family else ())
        if not prompts:
            collapsed.append(case)
            continue
        choices = tuple((name, choice) for name, choice in case.choices if name not in prompts)
        if (case.name, choices) in seen:
            continue
        seen.add((case.name, choices))
        raw_input = {k: v for k, v in case.raw["input"].items() if k not in prompts}
        collapsed.append(replace(case, choices=choices, raw={**case.raw, "input": raw_input}))
    return collapsed


@dataclass
class Suite:
    """Every case of every data file, grouped by family, plus what was wrong."""

    cases: dict[str, list[Case]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def data_files(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("*_data.yaml"))


def load_suite(data_dir: Path, known_families: Iterable[str], root: Path | None = None) -> Suite:
    """Load and expand every `*_data.yaml` under `data_dir`.

    `known_families` are the families that have a test module; a data file naming another
    family is a problem. Paths in problems are relative to `root`.
    """
    known = set(known_families)
    suite = Suite()
    first_seen: dict[tuple[str, str], str] = {}
    for path in data_files(data_dir):
        rel = _relative(path, root)
        suite.files.append(rel)
        for family, given, problem in _read_file(path, rel, known):
            if problem is not None:
                suite.problems.append(problem)
                continue
            assert family is not None and given is not None
            raw_cases, source_problems = _from_source(family, given, path.parent.resolve())
            suite.problems += [Problem(rel, name, message, family) for name, message in source_problems]
            for raw_case in raw_cases:
                name = raw_case.get("case")
                if isinstance(name, str) and (family, name) in first_seen:
                    suite.problems.append(
                        Problem(rel, name, f"duplicate case name (first in {first_seen[(family, name)]})", family)
                    )
                    continue
                expanded, problem = expand_case(family, raw_case, rel, directory=path.parent.resolve())
                if problem is not None:
                    suite.problems.append(problem)
                    continue
                first_seen[(family, str(name))] = rel
                suite.cases.setdefault(family, []).extend(expanded)
    return suite


def _from_source(
    family: str, raw: dict[str, Any], directory: Path
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The raw cases a case stands for: itself, or the cases of the query file or dataset it
    names, when its family reads such sources."""
    descriptor = family_named(family)
    if descriptor is None or descriptor.case_source is None:
        return [raw], []
    return descriptor.case_source(raw, directory)


def _relative(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.name


def _read_file(
    path: Path, rel: str, known: set[str]
) -> Iterable[tuple[str | None, dict[str, Any] | None, Problem | None]]:
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        reason = getattr(error, "problem", None) or str(error).splitlines()[0]
        yield None, None, Problem(rel, None, f"{where}YAML syntax error: {reason}")
        return
    except OSError as error:
        yield None, None, Problem(rel, None, f"cannot read file: {error.strerror}")
        return
    if document is None:
        return
    if not isinstance(document, dict):
        yield None, None, Problem(rel, None, "top level must map a family name to a list of cases")
        return
    for family, cases in document.items():
        if str(family).startswith("_"):
            continue  # a holder for YAML anchors
        if family not in known:
            choices = ", ".join(sorted(known)) or "none"
            yield (
                None,
                None,
                Problem(rel, None, f"unknown family '{family}' (no benchmark/test_{family}.py; known: {choices})"),
            )
            continue
        if not isinstance(cases, list):
            yield None, None, Problem(rel, None, f"'{family}' must hold a list of cases", family)
            continue
        for index, raw_case in enumerate(cases):
            if not isinstance(raw_case, dict):
                yield None, None, Problem(rel, f"#{index + 1}", "a case must be a mapping", family)
                continue
            name = raw_case.get("case")
            if not isinstance(name, str) or not name:
                yield None, None, Problem(rel, f"#{index + 1}", "missing field 'case' (the case name)", family)
                continue
            if not NAME_PATTERN.match(name):
                yield (
                    None,
                    None,
                    Problem(rel, name, "case names may use only letters, digits, '_', '.' and '-'", family),
                )
                continue
            yield family, raw_case, None


def expand_case(
    family: str, raw: dict[str, Any], file: str, directory: Path = Path(".")
) -> tuple[list[Case], Problem | None]:
    """Expand one raw case into its variants and validate each against the family schema."""
    name = raw["case"]

    def problem(message: str) -> tuple[list[Case], Problem]:
        return [], Problem(file, name, message, family)

    descriptor = family_named(family)
    schema = descriptor.case_schema if descriptor else GenericCase
    # A family whose schema gives `expected` a default (a probe with no answer key) may omit it.
    expected_field = schema.model_fields.get("expected")
    required_fields = ["input"] + (["expected"] if expected_field is None or expected_field.is_required() else [])
    for required in required_fields:
        if required not in raw:
            return problem(f"missing field '{required}'")
    raw = {"expected": {}, **raw}
    unknown = set(raw) - {"case", "input", "expected"} - METADATA_FIELDS
    if unknown:
        return problem(f"unknown field(s) {', '.join(sorted(unknown))}")
    raw_input = raw["input"]
    if not isinstance(raw_input, dict):
        return problem("'input' must be a mapping")

    # A family may declare input fields whose mappings are plain values, not variant sets.
    plain_fields: set[str] = set(descriptor.plain_input_fields if descriptor else ())
    variant_fields: list[tuple[str, list[str]]] = []
    for key, value in raw_input.items():
        if isinstance(value, dict) and key not in plain_fields:
            if not value:
                return problem(f"input.{key}: empty variant dict (give at least one named variant)")
            bad = [str(choice) for choice in value if not NAME_PATTERN.match(str(choice))]
            if bad:
                return problem(f"input.{key}: variant name '{bad[0]}' may use only letters, digits, '_', '.', '-'")
            variant_fields.append((key, list(value)))

    metadata = {k: raw[k] for k in METADATA_FIELDS if k in raw}
    expanded: list[Case] = []
    for combination in itertools.product(*(choices for _, choices in variant_fields)):
        choices = tuple((fname, str(choice)) for (fname, _), choice in zip(variant_fields, combination, strict=True))
        resolved = dict(raw_input)
        for fname, choice in zip((f for f, _ in variant_fields), combination, strict=True):
            resolved[fname] = raw_input[fname][choice]
        content = {"input": resolved, "expected": raw["expected"]}
        try:
            validated: Any = schema.model_validate(content)
        except ValidationError as error:
            return problem(_first_error(error))
        case = Case(
            family=family,
            name=name,
            choices=choices,
            input=validated.input,
            expected=validated.expected,
            raw=content,
            file=file,
            metadata=metadata,
            directory=directory,
        )
        found = descriptor.check(case) if descriptor is not None and descriptor.check is not None else []
        if found:
            return problem("; ".join(dict.fromkeys(found)))
        expanded.append(case)
    return expanded, None


def _first_error(error: ValidationError) -> str:
    """Every error of the case on one line, `input.fragments: missing field; ...`, without
    pydantic's URLs: one round of fixes, not one per error."""
    return "; ".join(validation_errors(error))


def validation_errors(error: ValidationError) -> list[str]:
    """Pydantic's errors as `location: message`, without their URLs."""
    lines = []
    for found in error.errors():
        location = ".".join(str(part) for part in found["loc"])
        message = "missing field" if found["type"] == "missing" else found["msg"]
        # a check of the whole model has no location: its message names the fields itself
        lines.append(f"{location}: {message}" if location else message)
    return lines

"""Benchmark cases: find `*_data.yaml`, validate, expand variants, name and key each case.

A data file maps a family name to a list of cases. Each case has `case` (its name), `input`
and `expected` (optional where the family's schema gives it a default). Every dict-valued
field of `input` is a set of named variants, and a case expands into the product of all
variant choices, named `case:choice1:choice2` in the order the fields appear in the YAML
(BioChatter's convention).

Problems never raise out of this module: they are collected as `Problem`s, each a single
line naming the file, the case and everything wrong with it, so that one bad file cannot hide
the results of the others. A case's variants are counted before they are built: a few fields
of a few dozen variants each would otherwise expand to millions of cases.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, ValidationError

from ragmatrix.families import family_named
from ragmatrix.foundations.data_model import DataModel
from ragmatrix.foundations.shared_values import SharedValues
from ragmatrix.foundations.yamlfile import YamlFileError, error_line, field_errors, read_yaml
from ragmatrix.seam.case import Case, Problem, Skipped
from ragmatrix.suite import DEFAULT_MAX_VARIANTS

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]+$")
# Metadata a case may carry besides its content; it never changes a result.
METADATA_FIELDS = {"domain", "tags", "description"}


class GenericCase(DataModel):
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
        left_out = frozenset(prompts & set(case.written["input"]))
        left_out = _SHARED.one("left out", left_out, left_out)
        collapsed.append(replace(case, choices=choices, left_out=left_out, validated_as=case.choices))
    return collapsed


@dataclass
class Suite:
    """Every case of every data file, grouped by family, plus what was wrong."""

    cases: dict[str, list[Case]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)  # cases a source holds but that cannot run
    _collapsed: dict[str, list[Case]] = field(default_factory=dict, repr=False)

    def without_prompts(self, family: str) -> list[Case]:
        """`without_prompts` of the family's cases, collapsed once per session: parametrizing
        and the end of the session both need them."""
        if family not in self._collapsed:
            self._collapsed[family] = without_prompts(self.cases.get(family, []))
        return self._collapsed[family]


def data_files(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("*_data.yaml"))


def load_suite(
    data_dir: Path,
    known_families: Iterable[str],
    root: Path | None = None,
    max_variants: int = DEFAULT_MAX_VARIANTS,
) -> Suite:
    """Load and expand every `*_data.yaml` under `data_dir`.

    `known_families` are the families that have a test module; a data file naming another
    family is a problem. Paths in problems are relative to `root`. A case expanding to more
    than `max_variants` items is a problem, found before any of them is built.
    """
    known = set(known_families)
    suite = Suite()
    first_seen: dict[tuple[str, str], str] = {}
    for path in data_files(data_dir):
        rel = _relative(path, root)
        suite.files.append(rel)
        directory = path.parent.resolve()  # once per file: resolving costs system calls
        for family, given, problem in _read_file(path, rel, known):
            if problem is not None:
                suite.problems.append(problem)
                continue
            assert family is not None and given is not None
            raw_cases, source_problems = _from_source(family, given, directory)
            for entry in source_problems:
                found = suite.skipped if isinstance(entry, Skipped) else suite.problems
                found.append(Problem(rel, entry[0], entry[1], family))
            for raw_case in raw_cases:
                name = raw_case.get("case")
                if isinstance(name, str) and (family, name) in first_seen:
                    suite.problems.append(
                        Problem(rel, name, f"duplicate case name (first in {first_seen[(family, name)]})", family)
                    )
                    continue
                expanded, problem = expand_case(family, raw_case, rel, directory=directory, max_variants=max_variants)
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
        try:  # the file's own name, even when it is a link to somewhere else
            return (path.parent.resolve() / path.name).relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.name


Entry = tuple[str | None, dict[str, Any] | None, Problem | None]  # (family, raw case) or a problem


def _read_file(path: Path, rel: str, known: set[str]) -> list[Entry]:
    entries = list(_entries(path, rel, known))
    if not entries:  # only anchors, or only empty lists: nothing would run, and nothing would say why
        return [(None, None, Problem(rel, None, "no cases (every family's list is empty)"))]
    return entries


def _entries(path: Path, rel: str, known: set[str]) -> Iterable[Entry]:
    try:
        document = read_yaml(path, remember=True)
    except YamlFileError as error:
        yield None, None, Problem(rel, None, str(error))
        return
    except OSError as error:
        yield None, None, Problem(rel, None, f"cannot read file: {error.strerror}")
        return
    if document is None:
        yield None, None, Problem(rel, None, "the file is empty (no cases)")
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
            if name is None or name == "":
                yield None, None, Problem(rel, f"#{index + 1}", "missing field 'case' (the case name)", family)
                continue
            if not isinstance(name, str):
                message = f"the case name {_shown(name)} is {_kind(name)}, not text; quote it"
                yield None, None, Problem(rel, f"#{index + 1}", message, family)
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
    family: str,
    raw: dict[str, Any],
    file: str,
    directory: Path = Path("."),
    max_variants: int = DEFAULT_MAX_VARIANTS,
) -> tuple[list[Case], Problem | None]:
    """Expand one raw case into its variants and validate each against the family schema.

    The problem, if any, is one line listing everything wrong with the case, each part with
    its field path (`input.fragments.long.0: ...`), so that one round fixes a case.
    """
    name = raw["case"]
    errors: list[str] = []

    def problem() -> tuple[list[Case], Problem]:
        return [], Problem(file, name, _listed(errors), family)

    descriptor = family_named(family)
    schema = descriptor.schema if descriptor else GenericCase
    # A family whose schema gives `expected` a default (a probe with no answer key) may omit it.
    expected_field = schema.model_fields.get("expected")
    required_fields = ["input"] + (["expected"] if expected_field is None or expected_field.is_required() else [])
    missing = [f for f in required_fields if f not in raw]
    errors += [f"missing field '{f}'" for f in missing]
    unknown = set(raw) - {"case", "input", "expected"} - METADATA_FIELDS
    if unknown:
        errors.append(f"unknown field(s) {', '.join(sorted(unknown))}")
    raw_input = raw.get("input")
    if raw_input is None and "input" in missing:
        return problem()
    if not isinstance(raw_input, dict):
        errors.append("'input' must be a mapping")
        return problem()
    if descriptor is not None and descriptor.normalise_input is not None:
        raw_input = descriptor.normalise_input(raw_input)

    # A family may declare input fields whose mappings are plain values, not variant sets.
    plain_fields: set[str] = set(descriptor.plain_input_fields if descriptor else ())
    variant_fields: list[tuple[str, list[tuple[str, str]]]] = []
    naming: list[str] = []
    for key, value in raw_input.items():
        if isinstance(value, dict) and key not in plain_fields:
            naming += _variant_name_errors(f"input.{key}", value)
            # each (field, variant) pair held once across the suite: a case's choices are tuples of them
            variant_fields.append((key, [_SHARED.one("choice", (key, choice), (key, choice)) for choice in value]))
    if naming:
        errors += naming
        return problem()  # the variants cannot be named, so they are not built
    count = math.prod(len(choices) for _, choices in variant_fields)
    if count > max_variants:
        counts = " x ".join(f"{key} {len(choices)}" for key, choices in variant_fields)
        errors.append(
            f"input expands to {count:,} variants ({counts}), more than the limit of {max_variants:,} "
            "(--max-variants, or max_variants in the pytest ini file)"
        )
        return problem()

    metadata = {k: raw[k] for k in METADATA_FIELDS if k in raw} or _NO_METADATA
    expected = raw.get("expected", {})
    variant_names = {key for key, _ in variant_fields}
    expanded: list[Case] = []
    written = {"input": raw_input, "expected": expected}  # shared by the variants (`Case.raw`)
    for choices in itertools.product(*(pairs for _, pairs in variant_fields)):
        resolved = dict(raw_input)
        for key, choice in choices:
            resolved[key] = raw_input[key][choice]
        content = {"input": resolved, "expected": expected}
        try:
            validated = schema.model_validate(content)
        except ValidationError as error:
            errors += _located(error, dict(choices), variant_names, skip=missing)
            continue
        if errors:
            continue  # keep looking for errors, but build nothing
        case: Case[Any, Any] = Case(
            family=family,
            name=name,
            choices=choices,
            schema=schema,
            written=written,
            file=file,
            metadata=metadata,
            directory=directory,
        )
        # Held for the first reads only: a case validates itself again when read after that.
        case.keep_validated(validated)
        # the family's checks against what the case reads (an expected file not in its corpus)
        errors += descriptor.check(case) if descriptor is not None and descriptor.check is not None else []
        expanded.append(case)
    return (expanded, None) if not errors else problem()


# What many cases hold alike (a variant choice, the prompt fields left out), held once: a large
# suite holds its cases by the hundred thousand.
_SHARED = SharedValues()
_NO_METADATA: dict[str, Any] = {}

# Past this many, a case's problem line names how many more there are.
ERRORS_SHOWN = 20


def _listed(errors: list[str]) -> str:
    """The distinct errors in one line: the same mistake in every variant is said once."""
    distinct = list(dict.fromkeys(errors))
    more = len(distinct) - ERRORS_SHOWN
    return "; ".join(distinct[:ERRORS_SHOWN]) + (f"; and {more} more error(s)" if more > 0 else "")


def _variant_name_errors(path: str, variants: dict[Any, Any]) -> list[str]:
    """A variant name becomes part of an item's id, so it must be text: YAML reads `1`, `yes`
    and `~` as a number, a boolean and null, and `1` beside `"1"` would name two items alike."""
    if not variants:
        return [f"{path}: empty variant dict (give at least one named variant)"]
    errors = []
    for choice in variants:
        if not isinstance(choice, str):
            errors.append(f"{path}: variant name {_shown(choice)} is {_kind(choice)}, not text; quote it")
        elif not NAME_PATTERN.match(choice):
            errors.append(f"{path}: variant name '{choice}' may use only letters, digits, '_', '.', '-'")
    return errors


def _shown(value: Any) -> str:
    return "null" if value is None else str(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean to YAML (yes, no, on, off, true and false are)"
    if isinstance(value, int | float):
        return "a number to YAML"
    if value is None:
        return "null (no value) to YAML"
    return f"a {type(value).__name__} to YAML"


def _located(error: ValidationError, choices: dict[str, str], variant_fields: set[str], skip: list[str]) -> list[str]:
    """Pydantic's errors with the variant in the path where they lie inside one
    (`input.fragments.long.0`), leaving out fields already reported missing."""
    lines = []
    for path, message in field_errors(error):
        if path and path[0] in skip:
            continue
        if len(path) >= 2 and path[0] == "input" and path[1] in variant_fields:
            path = [*path[:2], choices[path[1]], *path[2:]]
        lines.append(error_line(path, message))
    return lines

"""The cases stored rows were run on, found in the data files as they read now: what `view`,
`show` and `export --trec` read beside each row (its messages, its query, its qrels).

An item is found by its family and id. An embedder's rows are named without the prompt fields'
choices (`without_prompts`), so both namings are looked up. A row whose case the files no
longer hold is simply not found; the problems of the files are returned as lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmatrix.seam.case import Case
from ragmatrix.suite.loader import load_suite


@dataclass
class Found:
    cases: dict[tuple[str, str], Case[Any, Any]] = field(default_factory=dict)  # (family, item id) -> case
    problems: list[str] = field(default_factory=list)


def known_families(benchmark_dir: Path) -> list[str]:
    """The families a benchmark checks: those with a `test_<family>.py` module."""
    return sorted(p.stem.removeprefix("test_") for p in benchmark_dir.glob("test_*.py"))


def find_cases(data_dir: Path, root: Path | None = None) -> Found:
    """Every case of the data files under `data_dir` (a benchmark's `data/`), by family and
    item id. Nothing there: nothing found, no problem."""
    found = Found()
    if not data_dir.is_dir():
        return found
    suite = load_suite(data_dir, known_families(data_dir.parent), root=root)
    for family, cases in suite.cases.items():
        for case in cases:
            found.cases[(family, case.id)] = case
        for case in suite.without_prompts(family):
            found.cases.setdefault((family, case.id), case)
    found.problems = [problem.line() for problem in suite.problems]
    return found

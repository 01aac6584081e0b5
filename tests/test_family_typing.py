"""mypy checks a family at its seam: the guide's family module (docs/extending.md), as the page
shows it, passes the project's mypy settings; a family whose callbacks read a field its input
does not have, or take another family's case, fails them where its descriptor is declared."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from project import REPO, files_shown, write

pytest.importorskip("mypy")

# Both mistakes sit in the descriptor's callbacks: a lambda (its `case` typed by the schema
# alone) and a function written for another family's case.
DRIFTING_FAMILY = """
from pydantic import BaseModel

from ragmatrix import Case, Family, Headline, Model


class DriftInput(BaseModel):
    prompt: str


class DriftExpected(BaseModel):
    answer: str


class DriftCase(BaseModel):
    input: DriftInput
    expected: DriftExpected


class OtherInput(BaseModel):
    query: str


def other_texts(case: Case[OtherInput, DriftExpected], model: Model) -> tuple[list[str], list[str]]:
    return [case.input.query], []


FAMILY = Family(
    name="drift",
    scoring_version=1,
    case_schema=DriftCase,
    headline=Headline("accuracy", "the share of answers that match"),
    first_requests=lambda case, model: [[{"role": "user", "content": case.input.question}]],
    first_texts=other_texts,
)
"""


def mypy(tmp_path: Path, module: Path) -> subprocess.CompletedProcess[str]:
    """The project's mypy, with its settings, on one module, against this checkout's package."""
    environment = {**os.environ, "MYPYPATH": str(REPO)}
    command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
    command += ["--cache-dir", str(tmp_path / "mypy_cache"), "--no-error-summary", module.name]
    return subprocess.run(command, cwd=module.parent, env=environment, capture_output=True, text=True)


def test_mypy_passes_the_guides_family_and_fails_one_that_reads_what_its_case_lacks(tmp_path):
    guide = tmp_path / "guide" / "echo.py"
    write(guide, files_shown(REPO / "docs" / "extending.md")["ragmatrix/families/echo.py"])
    checked = mypy(tmp_path, guide)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    drifting = tmp_path / "drifting" / "drift.py"
    write(drifting, DRIFTING_FAMILY)
    failed = mypy(tmp_path, drifting)  # the package's types come from the cache of the first run
    assert failed.returncode == 1, failed.stdout + failed.stderr
    errors = [line for line in failed.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 2, failed.stdout
    assert any('"DriftInput" has no attribute "question"' in line for line in errors), failed.stdout
    assert any('Argument "first_texts" to "Family" has incompatible type' in line for line in errors), failed.stdout

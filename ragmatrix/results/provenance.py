"""Where the rows of a run come from: the row format, the ragmatrix version, and the commit of
the benchmark repository, marked dirty when its files differ from that commit.

Found once per session, when the first row is written. The results folder, the cache folder
and Python's bytecode folders are left out of the dirty check: a run writes to them (importing
the test modules writes `__pycache__`), and that is no change to what produced the results.
Outside a git checkout, or without git, the commit is unknown (None), never a guess.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ragmatrix.results.rows import ROW_FORMAT, Provenance

GIT_TIMEOUT_S = 20
# Every `__pycache__` folder of the checkout, as a pathspec that `git status` leaves out.
_BYTECODE = ":(top,exclude,glob)**/__pycache__/**"


def ragmatrix_version() -> str | None:
    try:
        return version("ragmatrix")
    except PackageNotFoundError:
        return None


def provenance(repository: Path, written: Sequence[Path] = ()) -> Provenance:
    """The provenance of rows written now by a benchmark in `repository` (any folder inside
    the checkout); `written` are the folders the run writes (results, caches)."""
    commit, dirty = git_state(repository, written)
    return Provenance(format=ROW_FORMAT, ragmatrix=ragmatrix_version(), commit=commit, dirty=dirty)


def git_state(repository: Path, written: Sequence[Path] = ()) -> tuple[str | None, bool | None]:
    """(HEAD's commit, whether the checkout differs from it, the `written` folders aside), or
    (None, None) outside git."""
    commit = _git(repository, "rev-parse", "--verify", "HEAD")
    if commit is None:
        return None, None
    top = _git(repository, "rev-parse", "--show-toplevel")
    excluded = [_BYTECODE]
    for folder in written if top else ():
        try:
            inside = Path(folder).resolve().relative_to(Path(str(top)).resolve())
        except ValueError:
            continue  # outside the checkout: nothing to leave out
        if inside.parts:
            excluded.append(f":(top,exclude){inside.as_posix()}")
    status = _git(repository, "status", "--porcelain", "--ignore-submodules", "--", ":(top)", *excluded)
    return commit, (bool(status) if status is not None else None)


def _git(folder: Path, *args: str) -> str | None:
    """git's output in `folder`, stripped; None where git is missing or fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None

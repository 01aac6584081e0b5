"""The one error a run stops with when a folder it must write cannot be written.

The results folder and the cache folder (`.benchmark_cache`) can be read-only, full or gone.
Reading never needs to write, so a fully cached run still works; a run that must write stops
at the first write that fails, with one line naming the folder and the cause, and leaves what
is stored as it was. `StorageError` is an `OSError`, so code that handles file errors handles
it too.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# SQLite's result codes that say the file system refused (not a busy database or a bad query).
_SQLITE_STORAGE = {"SQLITE_READONLY", "SQLITE_FULL", "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_PERM"}


class StorageError(OSError):
    """A folder the run must write cannot be written."""

    def __init__(self, folder: Path, cause: str, what: str = "results folder", code: int | None = None) -> None:
        super().__init__(code, f"cannot write the {what} {shown(folder)}: {cause}")
        self.folder = Path(folder)
        self.cause = cause
        self.what = what

    def __str__(self) -> str:
        return str(self.strerror)


def shown(path: Path) -> str:
    """`path` relative to the working directory when it lies inside it, else as it is."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)
    return str(path) if relative.startswith("..") else relative


def cause_of(error: BaseException) -> str | None:
    """The file system's reason, when `error` is a refused write; None for anything else."""
    if isinstance(error, StorageError):
        return error.cause
    if isinstance(error, OSError) and error.errno is not None:
        return os.strerror(error.errno)
    if isinstance(error, sqlite3.Error):
        name = str(getattr(error, "sqlite_errorname", ""))
        if "_".join(name.split("_")[:2]) in _SQLITE_STORAGE:
            return str(error)
    return None


def _folder_refuses(folder: Path) -> str | None:
    """Why a new file cannot be made in `folder` ("Read-only file system"), if it cannot:
    SQLite names only its own symptom ("unable to open database file")."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as error:
        return os.strerror(error.errno) if error.errno is not None else str(error)


@contextmanager
def writes_to(folder: Path, what: str = "results folder") -> Iterator[None]:
    """Turn a refused write under `folder` into one `StorageError` line."""
    try:
        yield
    except StorageError:
        raise
    except (OSError, sqlite3.Error) as error:
        cause = cause_of(error)
        if cause is None:
            raise
        code = error.errno if isinstance(error, OSError) else errno.EIO
        if isinstance(error, sqlite3.Error):
            refused = _folder_refuses(folder)
            cause = f"{refused} ({cause})" if refused else cause
        raise StorageError(folder, cause, what, code) from error

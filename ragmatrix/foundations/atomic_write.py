"""Replacing a file whole: readers see the old file or the new one, never half of either.

The new content goes to a temporary file beside the target, which is flushed and synced to
disk before it is renamed over the target, and the folder is synced after the rename, so that
a crash or a power cut leaves the old file or the complete new one. A failure while writing
(a full disk, an error in the content's generator) removes the temporary file and leaves the
target as it was. Every file ragmatrix replaces goes through here: the result and cost stores'
compaction, the remembered statistics, zbench-format datasets, the fingerprints of model
folders.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_atomically(path: Path, content: str | Iterable[str], *, make_folder: bool = False) -> None:
    """Replace `path` with `content` (a text, or lines written one after another), in UTF-8.
    `make_folder`: create the folder first when it is missing."""
    path = Path(path)
    if make_folder:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if isinstance(content, str):
                handle.write(content)
            else:
                handle.writelines(content)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates the file 0600; the target is a shared file like any other
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """Put the rename itself on disk (POSIX); where a folder cannot be opened, there is nothing
    to sync."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

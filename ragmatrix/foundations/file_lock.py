"""An exclusive lock between processes on one lock file: the result store's and the cost store's
appends, and the caches that one process fills while the others wait.

On POSIX it is `flock` on a descriptor opened at first use and kept, so taking it again is one
system call. filelock's portable lock stands in where `fcntl` is missing; on POSIX it is not
imported at all, which saves about 25 ms of CPU in every run that records a cost (its import
brings its asynchronous and read-write locks along). Not re-entrant: nothing here takes a lock
it holds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None  # type: ignore[assignment]


class FileLock:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._descriptor: int | None = None
        self._portable: Any = None

    def __enter__(self) -> FileLock:
        if fcntl is None:
            if self._portable is None:
                from filelock import FileLock as PortableLock

                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._portable = PortableLock(str(self.path))
            self._portable.acquire()
            return self
        if self._descriptor is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        fcntl.flock(self._descriptor, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if fcntl is None:
            self._portable.release()
        elif self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the kept descriptor (the lock is free once its holder has left it)."""
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None

    def __del__(self) -> None:
        # A lock taken once (`with FileLock(path):`) closes its descriptor as it goes.
        try:
            self.close()
        except Exception:  # at the interpreter's exit `os` may be gone already
            pass

"""Opening the files a run reads (data files, models.yaml, results, cost records) only when
they are regular files.

A FIFO named `x_data.yaml` blocks the reader until something writes to it, and a link to
`/dev/zero` is read until memory runs out. Such a path is opened without blocking, looked at,
and refused with `NotRegularFile` (an `OSError` whose `strerror` says what it is), so that
the caller reports it in its usual one line.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class NotRegularFile(OSError):
    """The path is no regular file (a FIFO, a device, a folder, a socket)."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """The file at `path` open for binary reading; `NotRegularFile` when it is none (links are
    followed), and the usual `OSError` when it cannot be opened."""
    # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except IsADirectoryError:
        raise NotRegularFile(21, "not a regular file (a folder)", os.fspath(path)) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a file")
            raise NotRegularFile(22, f"not a regular file ({kind})", os.fspath(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the file at `path`, refused as `open_regular` refuses it."""
    with open_regular(path) as handle:
        return handle.read()

"""A progress bar for long model work (an index build), with its rate and time left, and a
line for each step of a cold run that a bar does not show (an index being built).

Both are written to the terminal even while pytest captures the test's output: the pytest
layer gives the run's context a way to suspend capturing (`RunContext.suspend_capture`), and
they are written under it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

from ragmatrix.foundations.context import current


@contextmanager
def progress(total: int, description: str, unit: str) -> Iterator[Callable[[int], object]]:
    """A bar over `total` units; the context gives the function to call with each step done."""
    from tqdm import tqdm

    suspend = current().suspend_capture
    guard = suspend() if suspend is not None else nullcontext()
    with guard, tqdm(total=total, desc=description, unit=unit, file=sys.stderr, mininterval=0.5, smoothing=0.1) as bar:
        yield bar.update


def note(line: str) -> None:
    """`ragmatrix: <line>` on its own line of the terminal, so that a cold run says what it is
    doing; nothing where stderr is no terminal (CI logs, xdist workers, a test's capture)."""
    suspend = current().suspend_capture
    with suspend() if suspend is not None else nullcontext():
        stream = sys.stderr
        if stream is not None and stream.isatty():
            stream.write(f"\nragmatrix: {line}\n")
            stream.flush()

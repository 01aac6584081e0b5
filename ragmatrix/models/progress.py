"""A progress bar for long model work (an index build), with its rate and time left.

It is written to the terminal even while pytest captures the test's output: the pytest layer
hands `show_on_terminal` a way to suspend capturing, and a bar runs under it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

_suspend_capture: Callable[[], AbstractContextManager[None]] | None = None


def show_on_terminal(suspend: Callable[[], AbstractContextManager[None]] | None) -> None:
    """Bars are drawn inside `suspend()` (pytest's capture manager's); None draws them on
    stderr as it is."""
    global _suspend_capture
    _suspend_capture = suspend


@contextmanager
def progress(total: int, description: str, unit: str) -> Iterator[Callable[[int], object]]:
    """A bar over `total` units; the context gives the function to call with each step done."""
    from tqdm import tqdm

    guard = _suspend_capture() if _suspend_capture is not None else nullcontext()
    with guard, tqdm(total=total, desc=description, unit=unit, file=sys.stderr, mininterval=0.5, smoothing=0.1) as bar:
        yield bar.update

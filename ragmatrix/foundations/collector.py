"""The cyclic garbage collector kept off what a run makes once and keeps to its end.

A full collection walks every object the collector tracks, so each one walked again all that a
heavy import had made: sentence-transformers with torch, transformers and scikit-learn, about
460,000 objects (litellm about 300,000). Importing it and loading MiniLM ran seven full
collections, about 1 s of CPU, and the interpreter's collections at exit another second, for a
library that lives to the process's end anyway."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def made_to_last() -> Iterator[None]:
    """Run the block with the collector paused, then freeze every object alive (what the block
    made among them) out of its walks. The garbage the block left in cycles is frozen too (for
    MiniLM about 11,000 objects, and 13 MB more resident): it waits for a later session in the
    process, which unfreezes (`hooks.pytest_configure`). A collector paused by the caller stays
    paused."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
    gc.freeze()

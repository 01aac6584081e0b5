"""Statistics: metrics, intervals, paired tests and Bradley-Terry, as pure functions.

`code_version()` names the code that computes the numbers. Remembered intervals and tests
(`ragmatrix.report.memo`) are keyed on it, so a change to this package, or an upgrade of the
libraries it calls, never serves numbers computed by the code before it.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import threading
from functools import cache
from pathlib import Path

from ragmatrix.foundations.installs import install_stamp

# The libraries whose routines compute the intervals and tests (bootstrap, binomial and
# permutation tests, the seeded random generator).
LIBRARIES = ("numpy", "scipy")


@cache
def code_version() -> str:
    """The md5 of this package's source files and of the installs of LIBRARIES (each named by
    `install_stamp`, which a reinstall changes too, without reading every distribution's metadata).

    A hash rather than a number bumped by hand: a change that forgets the bump still counts."""
    return version_of(Path(__file__).parent)


def version_of(folder: Path) -> str:
    digest = hashlib.md5()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for name in LIBRARIES:
        digest.update(f"{name}:{install_stamp(name) or 'absent'}\0".encode())
    return digest.hexdigest()


def import_meanwhile() -> None:
    """Import scipy.stats on a background thread, once, while the process waits for something
    else (answers from a server): the leaderboard's intervals need it at the end, and its import
    costs about a second of CPU that the waiting leaves idle. Code of this package that needs
    scipy, or a library that imports it (a local model's), waits for it first (`settled`)."""
    global _warming
    if "scipy.stats" in sys.modules or _warming is not None:
        return
    # Not a daemon: the interpreter waits for it before it finalises. A daemon thread frozen
    # mid-import at exit (a run ended by Ctrl-C within the second) keeps Python's import lock,
    # and the next import, in any object's __del__ at shutdown, waits for it forever.
    _warming = threading.Thread(target=_import_scipy_stats, name="ragmatrix-import-scipy")
    _warming.start()


_warming: threading.Thread | None = None  # the background import, once started in this process


def settled() -> None:
    """Wait for the background import of scipy.stats, if one is under way, before importing
    scipy or a library that imports it. Two threads importing scipy's modules at once, each
    from its own end (scipy.stats here, scipy.sparse from bm25s there), can wait on each other's
    module locks; Python then breaks the cycle by failing one of the imports, or by handing one
    thread a module still being made."""
    warming = _warming
    if warming is None or warming is threading.current_thread():
        return
    while warming.is_alive():  # in steps: a Ctrl-C is handled only once this thread wakes
        warming.join(0.1)


def _import_scipy_stats() -> None:
    # numpy's OpenBLAS starts a thread per core as it is imported, and each spins for about
    # 0.1 s of CPU waiting for work (2^28 cycles) before it sleeps: told to sleep at once, they
    # cost 0.2 to 0.3 s of CPU less per run on 2 cores (`docs/scale.md`). A user's setting wins.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    before = set(sys.modules)
    try:
        import scipy.stats  # noqa: F401

        # What the import made (numpy's and scipy's modules, about 50,000 objects) lives to the
        # process's end: out of the cyclic collector's walks, as collection's end does for the
        # items (`hooks.pytest_collection_finish`). Each full collection during the run, and the
        # two at pytest's exit, walked all of it again: about 70 to 90 ms of CPU per run. The
        # freeze takes every object alive now, the run's few in flight too; the garbage among
        # them waits for a later session in the process, which unfreezes them.
        gc.freeze()
    except Exception:  # the code that needs it imports it again, and reports any failure
        # What this import made of scipy.stats goes too: a submodule made in full keeps the
        # package it was made under, and a later import would find the new package's parts
        # missing through it.
        for name in [n for n in list(sys.modules) if n not in before]:
            if name == "scipy.stats" or name.startswith("scipy.stats."):
                sys.modules.pop(name, None)

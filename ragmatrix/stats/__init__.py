"""Statistics: metrics, intervals, paired tests and Bradley-Terry, as pure functions.

`code_version()` names the code that computes the numbers. Remembered intervals and tests
(`ragmatrix.report.memo`) are keyed on it, so a change to this package, or an upgrade of the
libraries it calls, never serves numbers computed by the code before it.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path

# The libraries whose routines compute the intervals and tests (bootstrap, binomial and
# permutation tests, the seeded random generator).
LIBRARIES = ("numpy", "scipy")


@cache
def code_version() -> str:
    """The md5 of this package's source files and of the installed versions of LIBRARIES.

    A hash rather than a number bumped by hand: a change that forgets the bump still counts."""
    return version_of(Path(__file__).parent)


def version_of(folder: Path) -> str:
    digest = hashlib.md5()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for name in LIBRARIES:
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "absent"
        digest.update(f"{name}=={installed}\0".encode())
    return digest.hexdigest()

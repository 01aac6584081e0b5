"""A remembered-statistics file: intervals and paired tests by the md5 of their inputs, under
the version of the statistics code that computed them (`ragmatrix.stats.code_version`). A file
written by other statistics code is not read: after an upgrade every number is computed again,
and the old ones are dropped when the file is saved.

A fully cached `pytest benchmark` prints the same leaderboard as the run before it; with the
numbers remembered it does so without importing scipy (over a second on its own). The memo is
handed to the aggregation by its caller, which saves it: the aggregation itself stays pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.foundations.keys import md5_of
from ragmatrix.stats import code_version

T = TypeVar("T")
# Entries kept besides those this run used, so that a `-k` run does not forget the full run's.
KEEP_UNUSED = 20000


class Memo:
    def __init__(self, path: Path | None, version: str | None = None) -> None:
        """`version`: the statistics code's version (default: `ragmatrix.stats.code_version()`)."""
        self.path = path
        self.version = version or code_version()
        self._known: dict[str, Any] = {}
        self._used: set[str] = set()
        self._changed = False
        if path is not None:
            try:
                loaded = json.loads(path.read_text())
            except (OSError, ValueError):
                loaded = None
            if isinstance(loaded, dict) and loaded.get("version") == self.version:
                entries = loaded.get("entries")
                self._known = entries if isinstance(entries, dict) else {}

    def remember(self, inputs: Any, compute: Callable[[], T], dump: Callable[[T], Any], load: Callable[[Any], T]) -> T:
        """The value for `inputs`, computed once and then read back."""
        key = md5_of(inputs)
        self._used.add(key)
        if key in self._known:
            try:
                return load(self._known[key])
            except (TypeError, ValueError, KeyError):
                pass  # an entry of an older shape: compute it again
        value = compute()
        self._known[key] = dump(value)
        self._changed = True
        return value

    def save(self) -> None:
        if self.path is None or not self._changed:
            return
        unused = [key for key in self._known if key not in self._used][-KEEP_UNUSED:]
        kept = {key: self._known[key] for key in [*unused, *self._used] if key in self._known}
        try:
            write_atomically(self.path, json.dumps({"version": self.version, "entries": kept}), make_folder=True)
        except OSError:
            pass  # a memo that cannot be written is only slower

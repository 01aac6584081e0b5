"""A remembered-statistics file: intervals and paired tests by the md5 of their inputs.

A fully cached `pytest benchmark` prints the same leaderboard as the run before it; with the
numbers remembered it does so without importing scipy (over a second on its own). The memo is
handed to the aggregation by its caller, which saves it: the aggregation itself stays pure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ragmatrix.keys import md5_of

T = TypeVar("T")
# Entries kept besides those this run used, so that a `-k` run does not forget the full run's.
KEEP_UNUSED = 20000


class Memo:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._known: dict[str, Any] = {}
        self._used: set[str] = set()
        self._changed = False
        if path is not None:
            try:
                loaded = json.loads(path.read_text())
                self._known = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._known = {}

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
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(kept))
            os.replace(temporary, self.path)
        except OSError:
            pass  # a memo that cannot be written is only slower

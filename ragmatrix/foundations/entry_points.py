"""The entry points of installed distributions in ragmatrix's groups, read once per run.

Reading them walks every installed distribution's metadata (3 to 4 ms of CPU in an
environment of a few hundred, whichever group is asked for), so the families' and the
providers' groups are read together, by the first of the two to ask (`group`), and kept in
the run's context: a later run in the same process reads them again. The same read answers
pydantic's question, whether any distribution has a plugin for it (`_no_pydantic_plugins`).
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import EntryPoint, entry_points

from ragmatrix.foundations.context import RunContext, current

FAMILIES = "ragmatrix.families"
PROVIDERS = "ragmatrix.providers"
PYDANTIC_PLUGINS = "pydantic"  # the group pydantic reads its plugins from


class EntryPointScan:
    """One run's read of the entry points in ragmatrix's groups."""

    def __init__(self, run: RunContext) -> None:
        found = entry_points()
        self.by_group = {name: list(found.select(group=name)) for name in (FAMILIES, PROVIDERS)}
        if not found.select(group=PYDANTIC_PLUGINS):
            _no_pydantic_plugins()


def _no_pydantic_plugins() -> None:
    """Tell pydantic that no installed distribution has a plugin for it, as this read found:
    otherwise it walks every distribution's metadata again as it builds its first validator
    (2 to 4 ms of CPU before a run's first request, for the models file's entries). Through
    its loader's cache, a private name, filled only while pydantic has not read the entry
    points itself: where the name changes, pydantic reads them as before. A process that has
    not imported pydantic is left without it."""
    if "pydantic" not in sys.modules:
        return
    try:
        loader = importlib.import_module("pydantic.plugin._loader")
    except ImportError:
        return
    if getattr(loader, "_plugins", {}) is None:
        loader._plugins = {}  # type: ignore[attr-defined]


def group(name: str) -> list[EntryPoint]:
    """The entry points of one of ragmatrix's groups (`FAMILIES`, `PROVIDERS`) in this run."""
    return current().part(EntryPointScan).by_group[name]

"""The entry points of installed distributions in ragmatrix's groups, read once per run.

Reading them walks every installed distribution's metadata (3 to 4 ms of CPU in an
environment of a few hundred, whichever group is asked for), so the families' and the
providers' groups are read together, by the first of the two to ask (`group`), and kept in
the run's context: a later run in the same process reads them again.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from ragmatrix.foundations.context import RunContext, current

FAMILIES = "ragmatrix.families"
PROVIDERS = "ragmatrix.providers"


class EntryPointScan:
    """One run's read of the entry points in ragmatrix's groups."""

    def __init__(self, run: RunContext) -> None:
        found = entry_points()
        self.by_group = {name: list(found.select(group=name)) for name in (FAMILIES, PROVIDERS)}


def group(name: str) -> list[EntryPoint]:
    """The entry points of one of ragmatrix's groups (`FAMILIES`, `PROVIDERS`) in this run."""
    return current().part(EntryPointScan).by_group[name]
